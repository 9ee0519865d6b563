#include "train/accumulate.h"

#include <cmath>

namespace snug {

namespace {

// Puts the model back to a plain backward (micro-batch 0 of 1, no position ids) on every exit.
class WindowScope {
 public:
  WindowScope(Model& model, bool positions) : model_(model), positions_(positions) {}
  ~WindowScope() {
    model_.set_micro_batch(0, 1);
    if (positions_) model_.set_position_ids({});
  }
  WindowScope(const WindowScope&) = delete;
  WindowScope& operator=(const WindowScope&) = delete;

 private:
  Model& model_;
  bool positions_;
};

}  // namespace

double accumulate_gradients(Model& model, const int32_t* inputs, const int32_t* targets, int64_t B,
                            int64_t T, int64_t accum, int64_t window_targets, double loss_scale) {
  return accumulate_gradients(model, inputs, targets, nullptr,
                              std::vector<int64_t>(static_cast<size_t>(accum), T), B, T,
                              window_targets, loss_scale);
}

double accumulate_gradients(Model& model, const int32_t* inputs, const int32_t* targets,
                            const int32_t* positions, const std::vector<int64_t>& cols, int64_t B,
                            int64_t T, int64_t window_targets, double loss_scale,
                            const std::function<void()>& after_backward) {
  double loss_sum = 0.0;  // sum of per-token losses over the window
  const auto accum = static_cast<int64_t>(cols.size());
  const WindowScope scope(model, positions != nullptr);
  for (int64_t micro = 0; micro < accum; ++micro) {
    const int64_t off = micro * B * T;
    const int64_t C = cols[static_cast<size_t>(micro)];
    model.set_micro_batch(micro, accum);
    int64_t n = 0;
    for (int64_t i = off; i < off + B * C; ++i) n += targets[i] >= 0 ? 1 : 0;
    if (positions != nullptr) model.set_position_ids({positions + off, positions + off + B * C});
    const float scale = window_targets > 0
                            ? static_cast<float>(static_cast<double>(n) * loss_scale /
                                                 static_cast<double>(window_targets))
                            : 0.0f;
    const float loss = model.forward(inputs + off, targets + off, B, C, true, scale);
    if (!std::isfinite(loss)) {
      model.free_activations();
      return loss;
    }
    loss_sum += static_cast<double>(loss) * static_cast<double>(n);
    model.backward(scale);
    if (after_backward) after_backward();
  }
  return window_targets > 0 ? loss_sum / static_cast<double>(window_targets) : 0.0;
}

}  // namespace snug

#include "train/fused_step.h"

#include <cmath>
#include <functional>
#include <utility>

#include "core/error.h"
#include "kernels/op_table.h"

namespace snug {

namespace {

// Sets the model's grad-ready hook for one scope.
class HookScope {
 public:
  HookScope(Model& model, std::function<void(Parameter&)> hook) : model_(model) {
    model_.set_grad_ready_hook(std::move(hook));
  }
  ~HookScope() { model_.set_grad_ready_hook(nullptr); }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;

 private:
  Model& model_;
};

double grad_sum_squares(const Parameter& p) {
  if (p.grad.is_meta()) return 0.0;
  return p.grad.device().ops().sum_squares(p.grad.data<float>(), p.grad.numel());
}

// forward + backward of the batch with `hook`; returns the loss (backward skipped if non-finite).
float pass(Model& model, const int32_t* inputs, const int32_t* targets, int64_t B, int64_t T,
           std::function<void(Parameter&)> hook) {
  int64_t n = 0;
  for (int64_t i = 0; i < B * T; ++i) n += targets[i] >= 0 ? 1 : 0;
  const float scale = n > 0 ? 1.0f : 0.0f;
  HookScope scope(model, std::move(hook));
  const float loss = model.forward(inputs, targets, B, T, true, scale);
  if (!std::isfinite(loss)) {
    model.free_activations();
    return loss;
  }
  model.backward(scale);
  return loss;
}

}  // namespace

void check_fused_settings(const std::string& optim, int64_t gradient_accumulation_steps,
                          bool fp16) {
  SNUG_CHECK(gradient_accumulation_steps == 1, "--optim ", optim,
             " cannot accumulate gradients (--gradient-accumulation-steps ",
             gradient_accumulation_steps,
             "): it applies each gradient inside backward and frees it at once; use a larger "
             "--per-device-train-batch-size or gradient checkpointing instead");
  SNUG_CHECK(!fp16, "--optim ", optim,
             " does not support --fp16: the loss scaler must see every gradient before any "
             "update, and this optimizer updates inside backward; use --bf16");
}

FusedStepResult fused_optimizer_step(Model& model, InBackwardOptimizer& opt, const int32_t* inputs,
                                     const int32_t* targets, int64_t B, int64_t T, float lr,
                                     double max_grad_norm) {
  FusedStepResult r;
  double sq = 0.0;
  float coef = 1.0f;
  const bool clip = max_grad_norm > 0.0;
  if (clip) {
    // Pass 1: the global norm only.
    const float loss = pass(model, inputs, targets, B, T, [&](Parameter& p) {
      sq += grad_sum_squares(p);
      p.free_grad();
    });
    if (!std::isfinite(loss)) {
      r.loss = loss;
      return r;
    }
    r.grad_norm = std::sqrt(sq);
    // torch.nn.utils.clip_grad_norm_: max_norm / (norm + 1e-6), clamped to 1.
    const double c = max_grad_norm / (r.grad_norm + 1e-6);
    if (c < 1.0) coef = static_cast<float>(c);
  }
  opt.begin_step(lr, coef);
  const float loss = pass(model, inputs, targets, B, T, [&](Parameter& p) {
    if (!clip) sq += grad_sum_squares(p);
    opt.update(p);
  });
  r.loss = loss;
  if (!clip) r.grad_norm = std::sqrt(sq);
  return r;
}

}  // namespace snug

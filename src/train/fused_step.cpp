#include "train/fused_step.h"

#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "core/error.h"
#include "train/grad_norm.h"

namespace snug {

namespace {

// One pass's grad-ready listener, with the head weight's gradient asked for last (so that it
// does not live through the whole backward beside each block's), for one scope.
class PassScope {
 public:
  PassScope(Model& model, std::function<void(Parameter&)> update)
      : model_(model),
        head_last_(model.head_grad_last()),
        sub_(model, [u = std::move(update)](Parameter& p, const GradReadyInfo&) { u(p); }) {
    model_.set_head_grad_last(true);
    model_.set_micro_batch(0, 1);  // the step is one micro-batch (check_fused_settings)
  }
  ~PassScope() { model_.set_head_grad_last(head_last_); }
  PassScope(const PassScope&) = delete;
  PassScope& operator=(const PassScope&) = delete;

 private:
  Model& model_;
  bool head_last_;
  GradReadySubscription sub_;
};

// forward + backward of the batch, `hook` getting each parameter whose gradient is ready, the
// loss multiplied by loss_scale; returns the loss (backward skipped if non-finite).
float pass(Model& model, const int32_t* inputs, const int32_t* targets, int64_t B, int64_t T,
           double loss_scale, std::function<void(Parameter&)> hook) {
  int64_t n = 0;
  for (int64_t i = 0; i < B * T; ++i) n += targets[i] >= 0 ? 1 : 0;
  const float scale = n > 0 ? static_cast<float>(loss_scale) : 0.0f;
  PassScope scope(model, std::move(hook));
  const float loss = model.forward(inputs, targets, B, T, true, scale);
  if (!std::isfinite(loss)) {
    model.free_activations();
    return loss;
  }
  model.backward(scale);
  return loss;
}

}  // namespace

void check_fused_settings(const std::string& optim, int64_t gradient_accumulation_steps) {
  SNUG_CHECK(gradient_accumulation_steps == 1, "--optim ", optim,
             " cannot accumulate gradients (--gradient-accumulation-steps ",
             gradient_accumulation_steps,
             "): it applies each gradient inside backward and frees it at once; use a larger "
             "--per-device-train-batch-size or gradient checkpointing instead");
}

FusedStepResult fused_optimizer_step(Model& model, InBackwardOptimizer& opt, const int32_t* inputs,
                                     const int32_t* targets, int64_t B, int64_t T, float lr,
                                     double max_grad_norm, double loss_scale) {
  FusedStepResult r;
  double sq = 0.0;
  const bool scaled = loss_scale > 0.0;
  const double scale = scaled ? loss_scale : 1.0;
  const bool clip = max_grad_norm > 0.0;
  double coef = 1.0;
  if (clip || scaled) {
    // Pass 1: the global norm (of the scaled gradients) only.
    const float loss = pass(model, inputs, targets, B, T, scale, [&](Parameter& p) {
      sq += grad_sum_squares(p);
      p.free_grad();
    });
    if (!std::isfinite(loss)) {
      r.loss = loss;
      return r;
    }
    if (!std::isfinite(sq)) {
      r.loss = loss;
      r.grad_norm = std::numeric_limits<double>::quiet_NaN();
      r.overflow = true;
      return r;
    }
    r.grad_norm = std::sqrt(sq) / scale;
    if (clip) coef = clip_coefficient(r.grad_norm, max_grad_norm);
    coef /= scale;
  }
  opt.begin_step(lr, static_cast<float>(coef));
  const bool measure = !(clip || scaled);
  const float loss = pass(model, inputs, targets, B, T, scale, [&](Parameter& p) {
    if (measure) {
      sq += grad_sum_squares(p);
    } else if (scaled && !std::isfinite(grad_sum_squares(p))) {
      r.overflow = true;
      p.free_grad();
      return;
    }
    opt.update(p);
  });
  r.loss = loss;
  if (measure) r.grad_norm = std::sqrt(sq);
  return r;
}

}  // namespace snug

#include "optim/adamw.h"

#include "kernels/kernels.h"

namespace snug {

AdamW::AdamW(const ParameterList& params, const OptimizerOptions& opts) : opts_(opts) {
  for (Parameter* p : params)
    if (p->requires_grad) state_.push_back({p, {}, {}});
}

void AdamW::allocate(State& s) {
  const Parameter& p = *s.p;
  s.exp_avg =
      Tensor::zeros(p.value.shape(), DType::f32, Category::optimizer_state, p.value.device());
  s.exp_avg_sq =
      Tensor::zeros(p.value.shape(), DType::f32, Category::optimizer_state, p.value.device());
}

std::vector<std::pair<std::string, Tensor*>> AdamW::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (State& s : state_) {
    if (!s.exp_avg.defined()) allocate(s);
    out.emplace_back(s.p->name + ".exp_avg", &s.exp_avg);
    out.emplace_back(s.p->name + ".exp_avg_sq", &s.exp_avg_sq);
  }
  return out;
}

void AdamW::step(float lr) {
  ++steps_;
  for (State& s : state_) {
    Parameter& p = *s.p;
    if (!p.grad.defined()) continue;
    if (!s.exp_avg.defined()) allocate(s);
    if (p.value.is_meta()) continue;
    const float wd = p.decay ? opts_.weight_decay : 0.0f;
    kernels::adamw_update(p.value.data<float>(), p.grad.data<float>(), s.exp_avg.data<float>(),
                          s.exp_avg_sq.data<float>(), p.value.numel(), lr, opts_.beta1, opts_.beta2,
                          opts_.eps, wd, steps_);
  }
}

}  // namespace snug

#include "optim/lion.h"

#include "kernels/op_table.h"

namespace snug {

Lion::Lion(const ParameterList& params, const OptimizerOptions& opts) : opts_(opts) {
  for (Parameter* p : params)
    if (p->requires_grad) state_.push_back({p, {}});
}

std::vector<std::pair<std::string, Tensor*>> Lion::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (State& s : state_) {
    const Parameter& p = *s.p;
    if (!s.exp_avg.defined())
      s.exp_avg = Tensor::zeros(p.value.shape(), DType::f32, Category::optimizer_state,
                                state_device(p, opts_));
    out.emplace_back(p.name + ".exp_avg", &s.exp_avg);
  }
  return out;
}

void Lion::step(float lr) {
  ++steps_;
  for (State& s : state_) {
    Parameter& p = *s.p;
    if (!p.grad.defined()) continue;
    if (!s.exp_avg.defined())
      s.exp_avg = Tensor::zeros(p.value.shape(), DType::f32, Category::optimizer_state,
                                state_device(p, opts_));
    const float wd = p.decay ? opts_.weight_decay : 0.0f;
    p.value.device().ops().lion_update(p.value.data<float>(), p.grad.data<float>(),
                                       s.exp_avg.data<float>(), p.value.numel(), lr,
                                       opts_.lion_beta1, opts_.lion_beta2, wd);
  }
}

}  // namespace snug

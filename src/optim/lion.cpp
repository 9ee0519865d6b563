#include "optim/lion.h"

#include <algorithm>

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
      s.exp_avg =
          Tensor::zeros(p.value.shape(), DType::f32, Category::optimizer_state, p.value.device());
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
      s.exp_avg =
          Tensor::zeros(p.value.shape(), DType::f32, Category::optimizer_state, p.value.device());
    if (p.value.is_meta()) continue;
    const double wd = p.decay ? static_cast<double>(opts_.weight_decay) : 0.0;
    // Scalars as Python computes them (double), applied as float32 like torch does.
    const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * wd);
    const float b1 = opts_.lion_beta1, b2 = opts_.lion_beta2;
    const float one_minus_b1 = static_cast<float>(1.0 - static_cast<double>(b1));
    const float one_minus_b2 = static_cast<float>(1.0 - static_cast<double>(b2));
    const float neg_lr = -lr;
    float* w = p.value.data<float>();
    const float* g = p.grad.data<float>();
    float* m = s.exp_avg.data<float>();
    const int64_t n = p.value.numel();
    constexpr int64_t kGrain = 8192;
#pragma omp parallel for schedule(static)
    for (int64_t i0 = 0; i0 < n; i0 += kGrain) {
      const int64_t i1 = std::min(n, i0 + kGrain);
      for (int64_t i = i0; i < i1; ++i) {
        const float c = m[i] * b1 + one_minus_b1 * g[i];
        const float u = c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : 0.0f);
        w[i] = w[i] * decay + neg_lr * u;
        m[i] = m[i] * b2 + one_minus_b2 * g[i];
      }
    }
  }
}

}  // namespace snug

#include "optim/lomo.h"

#include "core/error.h"
#include "kernels/op_table.h"

namespace snug {

InBackwardOptimizer::InBackwardOptimizer(const ParameterList& params, const OptimizerOptions& opts)
    : opts_(opts) {
  for (Parameter* p : params)
    if (p->requires_grad) params_.push_back(p);
}

void InBackwardOptimizer::begin_step(float lr, float grad_coef) {
  ++steps_;
  lr_ = lr;
  coef_ = grad_coef;
}

void InBackwardOptimizer::update(Parameter& p) {
  if (!p.requires_grad || !p.grad.defined()) return;
  allocate(p);
  update_values(p);
  p.free_grad();
}

void InBackwardOptimizer::step(float lr) {
  begin_step(lr, 1.0f);
  for (Parameter* p : params_) update(*p);
}

void Lomo::update_values(Parameter& p) {
  const float wd = p.decay ? opts_.weight_decay : 0.0f;
  p.value.device().ops().lomo_update(p.value.data<float>(), p.grad.data<float>(), p.value.numel(),
                                     lr_, wd, coef_);
}

AdaLomo::AdaLomo(const ParameterList& params, const OptimizerOptions& opts)
    : InBackwardOptimizer(params, opts) {
  for (Parameter* p : params_) {
    SNUG_CHECK(p->value.ndim() == 1 || p->value.ndim() == 2, "adalomo: parameter '", p->name,
               "' has ", p->value.ndim(), " dimensions; only vectors and matrices are supported");
    state_.push_back({p, {}});
  }
}

AdaLomo::State& AdaLomo::state_for(const Parameter& p) {
  return find_state(state_, &p, "adalomo");
}

void AdaLomo::allocate(Parameter& p) {
  state_for(p).moment.allocate(p.value);
}

std::vector<std::pair<std::string, Tensor*>> AdaLomo::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (State& s : state_) {
    s.moment.allocate(s.p->value);
    s.moment.append_state(s.p->name, out);
  }
  return out;
}

void AdaLomo::update_values(Parameter& p) {
  FactoredMoment& fm = state_for(p).moment;
  const OpTable& ops = p.value.device().ops();
  const int64_t n = p.value.numel();
  float* w = p.value.data<float>();
  // The gradient buffer is the scratch: clipped in place, then overwritten by the update U
  // (it is freed right after this call).
  float* g = p.grad.data<float>();
  if (coef_ != 1.0f) ops.scale(g, coef_, n);
  const Beta2t b = adafactor_beta2t(static_cast<double>(steps_));
  // lr_t from RMS(p) before the update.
  const float lr_t = relative_lr(static_cast<float>(rms_of(ops, w, n)), static_cast<double>(lr_));
  const double wd = p.decay ? static_cast<double>(opts_.weight_decay) : 0.0;
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr_t) * wd);
  const FactoredMoment::Dims d = FactoredMoment::dims(p.value.shape());
  ops.adalomo_update(w, g, fm.row.data<float>(), fm.col.data<float>(), fm.full.data<float>(),
                     d.rows, d.cols, b.beta2t, b.one_minus_beta2t, lr_t, decay, wd > 0.0);
}

}  // namespace snug

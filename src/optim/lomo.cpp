#include "optim/lomo.h"

#include <cmath>

#include "core/error.h"
#include "kernels/op_table.h"
#include "kernels/stochastic_round.h"

namespace snug {

InBackwardOptimizer::InBackwardOptimizer(const ParameterList& params, const OptimizerOptions& opts)
    : opts_(opts) {
  for (Parameter* p : params)
    if (p->requires_grad) {
      position_.emplace(p, params_.size());
      params_.push_back(p);
    }
}

size_t InBackwardOptimizer::position(const Parameter& p) const {
  const auto it = position_.find(&p);
  SNUG_CHECK(it != position_.end(), name(), ": parameter '", p.name, "' is not optimized here");
  return it->second;
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

uint64_t InBackwardOptimizer::rounding_key(const Parameter& p) const {
  return kernels::rounding_key(opts_.rounding_seed, steps_, static_cast<int64_t>(position(p)));
}

namespace {
void check_bf16_grad(const Parameter& p, const char* who) {
  SNUG_CHECK(p.grad.dtype() == DType::bf16, who, ": bf16 parameter '", p.name, "' has a ",
             dtype_name(p.grad.dtype()), " gradient");
}
}  // namespace

void Lomo::update_values(Parameter& p) {
  const float wd = p.decay ? opts_.weight_decay : 0.0f;
  if (p.value.dtype() == DType::bf16) {
    check_bf16_grad(p, "lomo");
    p.value.device().ops().lomo_update_bf16(p.value.data_u16(), p.grad.data_u16(), p.value.numel(),
                                            lr_, wd, coef_, opts_.bf16_stochastic_rounding,
                                            rounding_key(p));
    return;
  }
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
  return state_[position(p)];
}

void AdaLomo::allocate(Parameter& p) {
  state_for(p).moment.allocate(p.value, p.value.device());
}

std::vector<std::pair<std::string, Tensor*>> AdaLomo::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (State& s : state_) {
    s.moment.allocate(s.p->value, s.p->value.device());
    s.moment.append_state(s.p->name, out);
  }
  return out;
}

void AdaLomo::update_values(Parameter& p) {
  FactoredMoment& fm = state_for(p).moment;
  const OpTable& ops = p.value.device().ops();
  const int64_t n = p.value.numel();
  const Beta2t b = adafactor_beta2t(static_cast<double>(steps_));
  const double wd = p.decay ? static_cast<double>(opts_.weight_decay) : 0.0;
  const FactoredMoment::Dims d = FactoredMoment::dims(p.value.shape());
  if (p.value.dtype() == DType::bf16) {
    check_bf16_grad(p, "adalomo");
    // lr_t from RMS(p) before the update (meta: 0, as rms_of).
    const double rms =
        std::sqrt(ops.sum_squares_bf16(p.value.data_u16(), n)) / std::sqrt(static_cast<double>(n));
    const float lr_t = relative_lr(static_cast<float>(rms), static_cast<double>(lr_));
    const float decay = static_cast<float>(1.0 - static_cast<double>(lr_t) * wd);
    ops.adalomo_update_bf16(p.value.data_u16(), p.grad.data_u16(), fm.row.data<float>(),
                            fm.col.data<float>(), fm.full.data<float>(), d.rows, d.cols, coef_,
                            b.beta2t, b.one_minus_beta2t, lr_t, decay, wd > 0.0,
                            opts_.bf16_stochastic_rounding, rounding_key(p));
    return;
  }
  float* w = p.value.data<float>();
  // The gradient buffer is the scratch: clipped in place, then overwritten by the update U
  // (it is freed right after this call).
  float* g = p.grad.data<float>();
  if (coef_ != 1.0f) ops.scale(g, coef_, n);
  // lr_t from RMS(p) before the update.
  const float lr_t = relative_lr(static_cast<float>(rms_of(ops, w, n)), static_cast<double>(lr_));
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr_t) * wd);
  ops.adalomo_update(w, g, fm.row.data<float>(), fm.col.data<float>(), fm.full.data<float>(),
                     d.rows, d.cols, b.beta2t, b.one_minus_beta2t, lr_t, decay, wd > 0.0);
}

}  // namespace snug

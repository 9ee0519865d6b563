#include "optim/optimizer8bit.h"

namespace snug {

Optimizer8bit::Optimizer8bit(const ParameterList& params, const OptimizerOptions& opts, int moments)
    : opts_(opts), moments_(moments) {
  for (Parameter* p : params)
    if (p->requires_grad) state_.push_back({p, uses_8bit(*p, opts), {}, {}, {}, {}});
}

bool Optimizer8bit::uses_8bit(const Parameter& p, const OptimizerOptions& opts) {
  if (p.value.numel() < opts.min_8bit_size) return false;
  const bool embedding =
      p.name.find("wte") != std::string::npos || p.name.find("wpe") != std::string::npos;
  return !embedding || opts.optim_8bit_embeddings;
}

int64_t Optimizer8bit::state_bytes(const Parameter& p, const OptimizerOptions& opts, int moments) {
  return quant8::moment_bytes(p.value.numel(), uses_8bit(p, opts), moments);
}

const Optimizer8bit::State& Optimizer8bit::state_of(const Parameter* p) const {
  return find_state(state_, p, name().c_str());
}

std::vector<quant8::Moment> Optimizer8bit::moments(State& s) const {
  std::vector<quant8::Moment> m = {{"exp_avg", &s.m, &s.absmax_m}};
  if (moments_ == 2) m.push_back({"exp_avg_sq", &s.v, &s.absmax_v});
  return m;
}

void Optimizer8bit::allocate(State& s) const {
  if (!s.m.defined())
    quant8::allocate_moments(moments(s), s.p->value.numel(), s.q8, state_device(*s.p, opts_));
}

std::vector<std::pair<std::string, Tensor*>> Optimizer8bit::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (State& s : state_) {
    allocate(s);
    quant8::append_moments(moments(s), s.p->name, s.q8, out);
  }
  return out;
}

void Optimizer8bit::step(float lr) {
  ++steps_;
  for (State& s : state_) {
    Parameter& p = *s.p;
    if (!p.grad.defined()) continue;
    allocate(s);
    update(s, p.value.device().ops(), p.value.data<float>(), p.grad.data<float>(), p.value.numel(),
           lr, p.decay ? opts_.weight_decay : 0.0f);
  }
}

}  // namespace snug

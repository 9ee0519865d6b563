#include "optim/lion8bit.h"

#include "core/error.h"
#include "kernels/op_table.h"
#include "optim/adamw8bit.h"
#include "optim/quant8.h"

namespace snug {

namespace {

std::vector<quant8::Moment> moments(Lion8bit::State& s) {
  return {{"exp_avg", &s.m, &s.absmax_m}};
}

}  // namespace

Lion8bit::Lion8bit(const ParameterList& params, const OptimizerOptions& opts) : opts_(opts) {
  for (Parameter* p : params)
    if (p->requires_grad) state_.push_back({p, AdamW8bit::uses_8bit(*p, opts), {}, {}});
}

int64_t Lion8bit::state_bytes(const Parameter& p, const OptimizerOptions& opts) {
  return quant8::moment_bytes(p.value.numel(), AdamW8bit::uses_8bit(p, opts), 1);
}

const Lion8bit::State& Lion8bit::state_of(const Parameter* p) const {
  return find_state(state_, p, "Lion8bit");
}

void Lion8bit::allocate(State& s) {
  quant8::allocate_moments(moments(s), s.p->value.numel(), s.q8, s.p->value.device());
}

std::vector<std::pair<std::string, Tensor*>> Lion8bit::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (State& s : state_) {
    if (!s.m.defined()) allocate(s);
    quant8::append_moments(moments(s), s.p->name, s.q8, out);
  }
  return out;
}

void Lion8bit::step(float lr) {
  ++steps_;
  for (State& s : state_) {
    Parameter& p = *s.p;
    if (!p.grad.defined()) continue;
    if (!s.m.defined()) allocate(s);
    const OpTable& ops = p.value.device().ops();
    const float wd = p.decay ? opts_.weight_decay : 0.0f;
    float* w = p.value.data<float>();
    const float* g = p.grad.data<float>();
    const int64_t n = p.value.numel();
    if (s.q8)
      ops.lion_bnb_update_8bit(w, g, s.m.data<uint8_t>(), s.absmax_m.data<float>(), n, lr,
                               opts_.lion_beta1, opts_.lion_beta2, wd, &quant8::signed_code());
    else
      ops.lion_bnb_update(w, g, s.m.data<float>(), n, lr, opts_.lion_beta1, opts_.lion_beta2, wd);
  }
}

}  // namespace snug

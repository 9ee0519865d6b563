#include "optim/adamw8bit.h"

#include "core/error.h"
#include "kernels/op_table.h"
#include "optim/quant8.h"

namespace snug {

namespace {

std::vector<quant8::Moment> moments(AdamW8bit::State& s) {
  return {{"exp_avg", &s.m, &s.absmax_m}, {"exp_avg_sq", &s.v, &s.absmax_v}};
}

}  // namespace

AdamW8bit::AdamW8bit(const ParameterList& params, const OptimizerOptions& opts, std::string name)
    : opts_(opts), name_(std::move(name)) {
  for (Parameter* p : params)
    if (p->requires_grad) state_.push_back({p, uses_8bit(*p, opts), {}, {}, {}, {}});
}

bool AdamW8bit::uses_8bit(const Parameter& p, const OptimizerOptions& opts) {
  if (p.value.numel() < opts.min_8bit_size) return false;
  const bool embedding =
      p.name.find("wte") != std::string::npos || p.name.find("wpe") != std::string::npos;
  return !embedding || opts.optim_8bit_embeddings;
}

int64_t AdamW8bit::state_bytes(const Parameter& p, const OptimizerOptions& opts) {
  return quant8::moment_bytes(p.value.numel(), uses_8bit(p, opts), 2);
}

const AdamW8bit::State& AdamW8bit::state_of(const Parameter* p) const {
  return find_state(state_, p, "AdamW8bit");
}

void AdamW8bit::allocate(State& s) {
  quant8::allocate_moments(moments(s), s.p->value.numel(), s.q8, s.p->value.device());
}

std::vector<std::pair<std::string, Tensor*>> AdamW8bit::state_tensors() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (State& s : state_) {
    if (!s.m.defined()) allocate(s);
    quant8::append_moments(moments(s), s.p->name, s.q8, out);
  }
  return out;
}

void AdamW8bit::step(float lr) {
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
      ops.adamw_bnb_update_8bit(w, g, s.m.data<uint8_t>(), s.v.data<uint8_t>(),
                                s.absmax_m.data<float>(), s.absmax_v.data<float>(), n, lr,
                                opts_.beta1, opts_.beta2, opts_.eps, wd, steps_,
                                &quant8::signed_code(), &quant8::unsigned_code());
    else
      ops.adamw_bnb_update(w, g, s.m.data<float>(), s.v.data<float>(), n, lr, opts_.beta1,
                           opts_.beta2, opts_.eps, wd, steps_);
  }
}

}  // namespace snug

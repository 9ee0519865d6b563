#include "optim/adamw8bit.h"

#include <utility>

namespace snug {

AdamW8bit::AdamW8bit(const ParameterList& params, const OptimizerOptions& opts, std::string name)
    : Optimizer8bit(params, opts, 2), name_(std::move(name)) {}

void AdamW8bit::update(State& s, const OpTable& ops, float* w, const float* g, int64_t n, float lr,
                       float wd) {
  if (s.q8)
    ops.adamw_bnb_update_8bit(w, g, s.m.data<uint8_t>(), s.v.data<uint8_t>(),
                              s.absmax_m.data<float>(), s.absmax_v.data<float>(), n, lr,
                              opts_.beta1, opts_.beta2, opts_.eps, wd, steps_,
                              &quant8::signed_code(), &quant8::unsigned_code());
  else
    ops.adamw_bnb_update(w, g, s.m.data<float>(), s.v.data<float>(), n, lr, opts_.beta1,
                         opts_.beta2, opts_.eps, wd, steps_);
}

}  // namespace snug

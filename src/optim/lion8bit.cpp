#include "optim/lion8bit.h"

namespace snug {

Lion8bit::Lion8bit(const ParameterList& params, const OptimizerOptions& opts)
    : Optimizer8bit(params, opts, 1) {}

void Lion8bit::update(State& s, const OpTable& ops, float* w, const float* g, int64_t n, float lr,
                      float wd) {
  if (s.q8)
    ops.lion_bnb_update_8bit(w, g, s.m.data<uint8_t>(), s.absmax_m.data<float>(), n, lr,
                             opts_.lion_beta1, opts_.lion_beta2, wd, &quant8::signed_code());
  else
    ops.lion_bnb_update(w, g, s.m.data<float>(), n, lr, opts_.lion_beta1, opts_.lion_beta2, wd);
}

}  // namespace snug

// AdamW (Loshchilov & Hutter), bit-for-bit the update order of torch.optim.AdamW: decoupled weight
// decay first, then the bias-corrected Adam step. State: exp_avg and exp_avg_sq, fp32, one each
// per trainable element (8 bytes per parameter), allocated on the first step. With bf16
// parameters (--bf16-full) the moments are bf16 (4 bytes per parameter) and the update runs in
// fp32 on widened values, storing the weights with stochastic rounding
// (kernels::adamw_update_bf16).
#pragma once

#include "optim/optimizer.h"

namespace snug {

class AdamW final : public Optimizer {
 public:
  AdamW(const ParameterList& params, const OptimizerOptions& opts);
  void step(float lr) override;
  std::string name() const override { return "adamw_torch"; }
  std::vector<std::pair<std::string, Tensor*>> state_tensors() override;

 private:
  struct State {
    Parameter* p;
    Tensor exp_avg, exp_avg_sq;
  };
  static void allocate(State& s);
  std::vector<State> state_;
  OptimizerOptions opts_;
};

}  // namespace snug

// AdamW (Loshchilov & Hutter), bit-for-bit the update order of torch.optim.AdamW: decoupled weight
// decay first, then the bias-corrected Adam step. State: exp_avg and exp_avg_sq, fp32, one each
// per trainable element (8 bytes per parameter), allocated on the first step. With bf16
// parameters (--bf16-full) the moments are bf16 (4 bytes per parameter) and the update runs in
// fp32 on widened values, storing the weights with stochastic rounding
// (kernels::adamw_update_bf16). With 16-bit parameters and OptimizerOptions::master_weights
// (--precision-layout deepspeed) the state is DeepSpeed's: an fp32 master copy of the weights
// ("<name>.fp32", as DeepSpeed's universal checkpoint names it) and fp32 moments, 12 bytes per
// parameter; the step updates the master from the widened 16-bit gradient and rounds it to
// nearest even into the weights (kernels::adamw_update_master).
#pragma once

#include "optim/optimizer.h"

namespace snug {

class AdamW final : public Optimizer {
 public:
  AdamW(const ParameterList& params, const OptimizerOptions& opts);
  void step(float lr) override;
  std::string name() const override { return "adamw_torch"; }
  std::vector<std::pair<std::string, Tensor*>> state_tensors() override;
  // optimizer_state bytes for one trainable parameter (the registry's state_bytes).
  static int64_t state_bytes(const Parameter& p, const OptimizerOptions& opts);

 private:
  struct State {
    Parameter* p;
    Tensor master, exp_avg, exp_avg_sq;  // master: --precision-layout deepspeed only
  };
  // Whether p's state carries an fp32 master (16-bit p under master_weights).
  static bool has_master(const Parameter& p, const OptimizerOptions& opts);
  void allocate(State& s) const;
  std::vector<State> state_;
  OptimizerOptions opts_;
};

}  // namespace snug

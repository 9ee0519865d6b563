// What the bitsandbytes-style 8-bit optimizers (optim/adamw8bit.h, optim/lion8bit.h) share: which
// parameters get 8-bit states, the per-parameter State (one or two moments, each u8 codes with one
// fp32 absmax per 256-element block, or fp32 values), its allocation at the parameter's first step
// in bitsandbytes' order, the checkpoint names and the step loop. A subclass supplies the update
// op.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kernels/op_table.h"
#include "optim/optimizer.h"
#include "optim/quant8.h"

namespace snug {

class Optimizer8bit : public Optimizer {
 public:
  struct State {
    Parameter* p;
    bool q8 = false;
    // exp_avg, and exp_avg_sq for two-moment optimizers: u8 codes (q8) or f32 values; flat,
    // undefined before step 1.
    Tensor m, v;
    Tensor absmax_m, absmax_v;  // f32, one per block (q8 only)
  };

  void step(float lr) override;
  // "<name>.exp_avg" (and ".exp_avg_sq"), u8 codes or f32; for 8-bit tensors then
  // "<name>.absmax_exp_avg" (and ".absmax_exp_avg_sq").
  std::vector<std::pair<std::string, Tensor*>> state_tensors() override;
  // The state kept for `p` (for tests and inspection); throws if p is not optimized here.
  const State& state_of(const Parameter* p) const;

  // Whether `p` gets 8-bit states under `opts`: at least min_8bit_size elements (bitsandbytes'
  // min_8bit_size), and not an embedding ("wte"/"wpe") unless optim_8bit_embeddings.
  static bool uses_8bit(const Parameter& p, const OptimizerOptions& opts);

 protected:
  // `moments`: 1 (exp_avg) or 2 (exp_avg, exp_avg_sq).
  Optimizer8bit(const ParameterList& params, const OptimizerOptions& opts, int moments);
  // Bytes of state for one parameter with `moments` moments.
  static int64_t state_bytes(const Parameter& p, const OptimizerOptions& opts, int moments);
  // Updates s.p's n values w from its gradient g; the state is allocated. wd is 0 for parameters
  // without decay.
  virtual void update(State& s, const OpTable& ops, float* w, const float* g, int64_t n, float lr,
                      float wd) = 0;
  OptimizerOptions opts_;

 private:
  std::vector<quant8::Moment> moments(State& s) const;
  // The state's tensors, zeroed, unless they exist.
  void allocate(State& s) const;
  std::vector<State> state_;
  int moments_;
};

}  // namespace snug

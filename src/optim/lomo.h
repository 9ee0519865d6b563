// Optimizers fused into backward: LOMO and AdaLOMO. The update of a parameter runs as soon as
// backward has finished its gradient (Model::add_grad_ready_listener), and the gradient is freed at
// once, so at most one block's gradients are ever live instead of all P of them
// (train/fused_step.h drives it; docs/optimizers.md has the memory and the costs).
//
// LOMO (Lv et al. 2023, "Full Parameter Fine-tuning for Large Language Models with Limited
// Resources", arXiv:2306.09782; OpenLMLab/LOMO lomo_optim/lomo.py): plain SGD, no state.
//   g *= clip_coef;  p *= 1 - lr wd (if wd > 0);  p -= lr g
// AdaLOMO (Lv et al. 2023, "AdaLomo: Low-memory Optimization with Adaptive Learning Rate",
// arXiv:2310.10195; lomo_optim/adalomo.py): Adafactor's factored second moment with update
// clipping and a learning rate relative to the parameter's RMS. Step t counts optimizer steps:
//   g *= clip_coef;  beta2_t = 1 - t^-0.8;  U2 = g^2 + 1e-30
//   matrices (m, n): R = beta2_t R + (1 - beta2_t) mean_over_cols(U2)   (m)
//                    C = beta2_t C + (1 - beta2_t) mean_over_rows(U2)   (n)
//                    U = (rsqrt(R / mean(R)) rsqrt(C)) * g
//   vectors:         V = beta2_t V + (1 - beta2_t) U2;  U = rsqrt(V) * g
//   U /= max(1, RMS(U) / 1.0);  lr_t = lr * max(1e-3, RMS(p))   (RMS(p) before the update)
//   p *= 1 - lr_t wd (if wd > 0);  p -= lr_t U
// State: 4 (m + n) bytes per matrix, 4 n per vector (as Adafactor). lomo_optim's loss_scale
// (2^10, the gradient multiplied then divided by it) is an fp16 device and an exact no-op in fp32,
// so it is left out.
//
// The global-norm clipping coefficient comes from a first backward that only measures the norm
// (LOMO's two-pass grad_norm + fused_backward); 1 when clipping is off. Under --fp16 it also
// carries 1 / loss scale (train/fused_step.h).
//
// bf16 parameters (--bf16-full): gradient and weights bf16, the same formulas in float on the
// widened values, the second moment (AdaLomo) in fp32 as above, and the weights rounded
// stochastically with the key rounding_key(rounding_seed, step, index of the parameter among the
// trainable ones) (kernels/stochastic_round.h: a resumed run draws the bits the uninterrupted
// one would). OptimizerOptions::bf16_stochastic_rounding false rounds to nearest even, as
// lomo_optim's p.copy_(p_fp32) into a bf16 parameter does.
#pragma once

#include <unordered_map>

#include "optim/factored_moment.h"
#include "optim/optimizer.h"

namespace snug {

class InBackwardOptimizer : public Optimizer {
 public:
  InBackwardOptimizer(const ParameterList& params, const OptimizerOptions& opts);
  // Starts an optimizer step: learning rate and the factor every gradient is multiplied by
  // (global-norm clipping coefficient; 1 for none). Counts the step.
  void begin_step(float lr, float grad_coef);
  // Updates `p` from its gradient (times grad_coef) and frees the gradient. No-op for parameters
  // without a gradient or not trainable. The arithmetic runs through the device's op table (none
  // on meta), the allocation and the freeing everywhere.
  void update(Parameter& p);
  // The non-fused form (tests, or a caller that ran an ordinary backward): begin_step(lr, 1),
  // then update() every parameter that holds a gradient.
  void step(float lr) override;

 protected:
  virtual void update_values(Parameter& p) = 0;  // p.grad defined, state allocated
  virtual void allocate(Parameter& /*p*/) {}
  // The stochastic-rounding key of p's update at this step (bf16 parameters).
  uint64_t rounding_key(const Parameter& p) const;
  // p's index in params_; throws snug::Error naming p when it is not optimized here. A map, not a
  // search: each update asks, and a search made a step quadratic in the parameter count (a plan
  // of 8000 layers spent 25 s in it).
  size_t position(const Parameter& p) const;
  float lr_ = 0.0f;
  float coef_ = 1.0f;
  OptimizerOptions opts_;
  ParameterList params_;  // trainable ones

 private:
  std::unordered_map<const Parameter*, size_t> position_;  // params_[position_[p]] == p
};

class Lomo final : public InBackwardOptimizer {
 public:
  using InBackwardOptimizer::InBackwardOptimizer;
  std::string name() const override { return "lomo"; }

 private:
  void update_values(Parameter& p) override;
};

class AdaLomo final : public InBackwardOptimizer {
 public:
  AdaLomo(const ParameterList& params, const OptimizerOptions& opts);
  std::string name() const override { return "adalomo"; }
  std::vector<std::pair<std::string, Tensor*>> state_tensors() override;

  // Bytes of state for one parameter of this shape (1-D or 2-D).
  static int64_t state_bytes(const Shape& shape) { return FactoredMoment::state_bytes(shape); }

 private:
  struct State {
    Parameter* p;
    FactoredMoment moment;
  };
  State& state_for(const Parameter& p);
  void allocate(Parameter& p) override;
  void update_values(Parameter& p) override;
  std::vector<State> state_;  // in params_'s order
};

}  // namespace snug

// Adafactor (Shazeer & Stern 2018, "Adafactor: Adaptive Learning Rates with Sublinear Memory
// Cost", arXiv:1804.04235) in the operation order of transformers.optimization.Adafactor (a port
// of fairseq's), with the settings the HF Trainer uses for optim="adafactor": scale_parameter
// False, relative_step False, warmup_init False, external lr; eps = (1e-30, 1e-3),
// clip_threshold 1.0, decay_rate -0.8, beta1 None (no first moment). Per parameter, step t >= 1:
//   beta2_t = 1 - t^-0.8
//   U2 = g^2 + 1e-30
//   matrices (ndim >= 2, over the last two dims, n rows x m cols):
//     R = beta2_t R + (1 - beta2_t) mean_over_cols(U2)        exp_avg_sq_row, shape [.., n]
//     C = beta2_t C + (1 - beta2_t) mean_over_rows(U2)        exp_avg_sq_col, shape [.., m]
//     U = (rsqrt(R / mean(R)) * rsqrt(C)) * g
//   vectors: V = beta2_t V + (1 - beta2_t) U2;  U = rsqrt(V) * g
//   U /= max(1, RMS(U) / clip_threshold);  U *= lr_t
//   p += (-wd * lr_t) * p   (if wd != 0);  p -= U
// lr_t is the scheduled lr, or with OptimizerOptions::adafactor_relative_step the paper's
// relative step min(1e-2, 1/sqrt(t)) * max(1e-3, RMS(p before the update)) (scale_parameter on).
// State: 4 * (rows + cols) bytes per matrix (times the leading batch dims), 4 * n per vector.
// The update U is recomputed in two passes rather than stored, so the step needs no full-size
// scratch; it uses untracked scratch of rows + cols floats (no more than the state itself).
#pragma once

#include "optim/factored_moment.h"
#include "optim/optimizer.h"

namespace snug {

class Adafactor final : public Optimizer {
 public:
  Adafactor(const ParameterList& params, const OptimizerOptions& opts);
  void step(float lr) override;
  std::string name() const override { return "adafactor"; }
  std::vector<std::pair<std::string, Tensor*>> state_tensors() override;
  nlohmann::json extra_state() const override;
  void load_extra_state(const nlohmann::json& state) override;

  // Bytes of state for one parameter of this shape.
  static int64_t state_bytes(const Shape& shape) { return FactoredMoment::state_bytes(shape); }

 private:
  struct State {
    Parameter* p;
    FactoredMoment moment;
    int64_t step = 0;
  };
  void update_one(State& s, float lr);
  std::vector<State> state_;
  OptimizerOptions opts_;
};

}  // namespace snug

// GaLore AdamW (Zhao et al. 2024, "GaLore: Memory-Efficient LLM Training by Gradient Low-Rank
// Projection", arXiv:2403.03507; jiaweizzhao/GaLore galore_torch/adamw.py and
// galore_projector.py, proj_type "std"), the HF Trainer's optim="galore_adamw".
//
// Targets: 2-D parameters of the attention and MLP blocks (names containing "attn" or "mlp", the
// GaLore repo's target modules); every other parameter gets the same AdamW without projection.
// Trainable parameters none of which is a target (BERT's names) are refused by name: GaLore
// that projects nothing would be AdamW (the HF Trainer refuses it too).
// For a target G (m, n), with r = min(galore_rank, m, n):
//   every update_proj_gap steps (at the parameter's steps 0, gap, 2 gap, ... before counting
//   the current one), P = the top-r singular vectors of G on its shorter side
//   (kernels/top_singular.h): m >= n: P = Vh[:r] (r, n), low = G P^T (m, r);
//                           m <  n: P = U[:, :r] (m, r), low = P^T G (r, n);
//   Adam on low, in galore_torch's (transformers-style) order:
//     m = b1 m + (1 - b1) low;  v = b2 v + (1 - b2) low^2;  N = m / (sqrt(v) + eps)
//     step_size = lr * sqrt(1 - b2^t) / (1 - b1^t)
//   back = (N P or P N) * scale;  p += -step_size * back;  then p += -lr wd p (decoupled, last).
// Non-targets: the same with low = G and back = N (no scale). Note eps is added to sqrt(v)
// without bias correction, unlike torch.optim.AdamW.
//
// State (optimizer_state): exp_avg and exp_avg_sq of the low-rank shape and the projector, so a
// target costs 4 (2 m r + r n) bytes when m >= n and 4 (2 r n + m r) when m < n; others 8 bytes
// per element. The step uses temporary scratch of the low-rank shape and of the full (m, n) shape
// (the projected-back update), freed before it returns. Per-parameter step counts are extra_state.
#pragma once

#include "optim/optimizer.h"

namespace snug {

class GaLoreAdamW final : public Optimizer {
 public:
  GaLoreAdamW(const ParameterList& params, const OptimizerOptions& opts);
  void step(float lr) override;
  std::string name() const override { return "galore_adamw"; }
  // "<name>.exp_avg", ".exp_avg_sq" and, for targets, ".projector".
  std::vector<std::pair<std::string, Tensor*>> state_tensors() override;
  nlohmann::json extra_state() const override;
  void load_extra_state(const nlohmann::json& state) override;
  // The projector is recomputed every --galore-update-proj-gap steps.
  bool memory_varies_by_step() const override { return true; }

  // Whether `p` is projected (2-D, in an attention or MLP block).
  static bool is_target(const Parameter& p);
  // The rank used for `p` (min(rank, m, n)), 0 for non-targets.
  static int64_t rank_for(const Parameter& p, const OptimizerOptions& opts);
  static int64_t state_bytes(const Parameter& p, const OptimizerOptions& opts);

 private:
  struct State {
    Parameter* p;
    int64_t rank = 0;  // 0: plain AdamW
    bool right = false;
    Tensor exp_avg, exp_avg_sq, projector;
    int64_t step = 0;
  };
  void allocate(State& s);
  void update_one(State& s, float lr);
  std::vector<State> state_;
  OptimizerOptions opts_;
};

}  // namespace snug

// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms", arXiv:2302.06675),
// in the order of lucidrains/lion-pytorch (lion_pytorch.py update_fn) and bitsandbytes' Lion:
//   p *= 1 - lr * wd                              (decoupled weight decay)
//   p -= lr * sign(beta1 * m + (1 - beta1) * g)   (sign(0) = 0, as torch.sgn)
//   m  = beta2 * m + (1 - beta2) * g
// Betas come from OptimizerOptions::lion_beta1/lion_beta2 (default 0.9, 0.99, the paper's), not
// from the Adam betas. The paper suggests a learning rate 3-10x smaller than AdamW's and a weight
// decay 3-10x larger. State: exp_avg, fp32, 4 bytes per parameter.
#pragma once

#include "optim/optimizer.h"

namespace snug {

class Lion final : public Optimizer {
 public:
  Lion(const ParameterList& params, const OptimizerOptions& opts);
  void step(float lr) override;
  std::string name() const override { return "lion"; }
  std::vector<std::pair<std::string, Tensor*>> state_tensors() override;

 private:
  struct State {
    Parameter* p;
    Tensor exp_avg;
  };
  std::vector<State> state_;
  OptimizerOptions opts_;
};

}  // namespace snug

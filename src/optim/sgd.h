// SGD with torch.optim.SGD's semantics (dampening 0, nesterov off, maximize off), the HF Trainer's
// optim="sgd". Per element, in torch's order:
//   d = g + wd * p                    (L2 weight decay added to the gradient, if wd != 0)
//   buf = d at the first step, then buf = momentum * buf + d    (only if momentum != 0)
//   p -= lr * (momentum != 0 ? buf : d)
// State: the momentum buffer, fp32, 4 bytes per parameter, only when momentum != 0 (torch keeps
// no state otherwise). Reference: torch/optim/sgd.py (_single_tensor_sgd); techniques.md §4f.
// With bf16 parameters (--bf16-full) the buffer is bf16 (2 bytes per parameter) and the weights
// are stored with stochastic rounding (kernels::sgd_update_bf16).
#pragma once

#include "optim/optimizer.h"

namespace snug {

class SGD final : public Optimizer {
 public:
  SGD(const ParameterList& params, const OptimizerOptions& opts);
  void step(float lr) override;
  std::string name() const override { return "sgd"; }
  std::vector<std::pair<std::string, Tensor*>> state_tensors() override;
  nlohmann::json extra_state() const override;
  void load_extra_state(const nlohmann::json& state) override;

 private:
  struct State {
    Parameter* p;
    Tensor momentum_buffer;
    bool started = false;  // the buffer holds a value (torch: "momentum_buffer" in state)
  };
  std::vector<State> state_;
  OptimizerOptions opts_;
};

}  // namespace snug

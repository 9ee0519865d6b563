// Optimizers update Parameters from their gradients. Their state lives in the device pool under
// `optimizer_state`, allocated on the first step (as torch.optim does), so a report shows exactly
// what each optimizer costs: AdamW 8 bytes per trainable parameter, SGD without momentum 0, ...
//
// Parameters whose `grad` is undefined at step time (frozen, or untouched by backward) are
// skipped, like PyTorch does for `p.grad is None`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/parameter.h"

namespace snug {

struct OptimizerOptions {
  float beta1 = 0.9f;    // adam_beta1
  float beta2 = 0.999f;  // adam_beta2
  float eps = 1e-8f;     // adam_epsilon
  float weight_decay = 0.0f;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update with learning rate `lr` (the scheduler's value for this step).
  virtual void step(float lr) = 0;
  // The --optim name, e.g. "adamw_torch".
  virtual std::string name() const = 0;
  // Number of completed steps.
  int64_t steps() const { return steps_; }

 protected:
  int64_t steps_ = 0;
};

// Names accepted by --optim (first is the default).
std::vector<std::string> optimizer_names();
// Throws snug::Error listing the accepted names for an unknown one.
std::unique_ptr<Optimizer> make_optimizer(const std::string& name, const ParameterList& params,
                                          const OptimizerOptions& opts);

}  // namespace snug

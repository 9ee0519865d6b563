// The one list of optimizers: everything the rest of snug knows about an optimizer by its --optim
// name is a field of its entry here, so adding an optimizer is its own files plus one entry in
// registry.cpp (docs/optimizers.md, "Adding an optimizer"). Nothing outside src/optim/ tests an
// optimizer's name; it asks its entry:
//   - make                the factory (make_optimizer)
//   - state_bytes         the exact optimizer_state bytes it allocates for one trainable
//                         parameter, in that parameter's dtype (state_bytes_formula, estimate)
//   - updates_in_backward applied inside backward (LOMO, AdaLOMO; train/fused_step.h): the
//                         estimator counts one block's gradient, not all of them
//   - bf16_params         updates bf16 parameters (--bf16-full); the others are refused
//   - master_weights      keeps fp32 master weights for 16-bit parameters (--precision-layout
//                         deepspeed, OptimizerOptions::master_weights); the others are refused
//   - elementwise         each element's update reads only that element's parameter, gradient
//                         and state (and the step count): ZeRO stages 1-2 may then cut a
//                         parameter anywhere and step the pieces (train/zero_optimizer.h); the
//                         others (factored or blockwise state, projections) are refused there
//   - advisor_rank        position in the fit advisor's optimizer dimension, 0: never proposed
//                         (plan/advisor.h; the closest to AdamW's results first)
//   - what_if_rank        position among the what-if table's "--optim X" rows, 0: no row
//                         (plan/what_if.h; the memory-saving alternatives to AdamW)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace snug {

struct OptimizerEntry {
  const char* name = "";                  // the --optim name (Hugging Face TrainingArguments.optim)
  std::vector<const char*> aliases = {};  // other names of the same optimizer
  std::unique_ptr<Optimizer> (*make)(const ParameterList& params, const OptimizerOptions& opts,
                                     const std::string& name_given) = nullptr;
  int64_t (*state_bytes)(const Parameter& p, const OptimizerOptions& opts) = nullptr;
  bool updates_in_backward = false;
  bool bf16_params = false;
  bool master_weights = false;
  bool elementwise = false;
  int advisor_rank = 0;
  int what_if_rank = 0;
};

// Every optimizer, in the order --optim's help and error messages list them.
const std::vector<OptimizerEntry>& optimizer_registry();
// The entry whose name or alias is `name`, or nullptr.
const OptimizerEntry* find_optimizer(const std::string& name);
// As find_optimizer, but throws snug::Error listing the known names ("--optim: unknown ...").
const OptimizerEntry& optimizer_entry(const std::string& name);
// The entries with advisor_rank (what_if_rank) > 0, in that rank's order.
std::vector<const OptimizerEntry*> advisor_optimizers();
std::vector<const OptimizerEntry*> what_if_optimizers();
// "adamw_torch, adamw, sgd, lomo or adalomo": the names (aliases included) that update bf16
// parameters.
std::string bf16_optimizer_names();
// The same for the optimizers with master_weights ("adamw_torch or adamw").
std::string master_weight_optimizer_names();

}  // namespace snug

// The one list of switches that the fit advisor (plan/advisor.h) and the what-if table
// (plan/what_if.h) propose: ways to run the same training with less memory, each as the flags
// it adds to the command line and the change it makes to the TrainingArguments. Adding a switch
// is one choice in one group of switches.cpp.
//
// Groups are in the what-if table's row order: checkpointing, attention, logits, precision,
// batch x accumulation, adapters, base storage, optimizer. The advisor searches the Cartesian
// product of the groups with advisor_rank > 0, in that rank's order (batch x accumulation,
// checkpointing, optimizer, precision, base storage), each over its choices marked `advisor`
// (among them the "off" choice that undoes the switch). The what-if table has one dry run per
// choice whose `what_if` predicate holds for the run (the switch is off there and would apply).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "train/training_args.h"

namespace snug {

struct Switch {
  std::string flags;  // what it adds to the command line ("" for a group's "off")
  std::function<void(TrainingArguments&)> apply;
  bool advisor = false;  // one of the advisor's choices in its group's dimension
  // Whether the what-if table tries it on `run` (null: never).
  std::function<bool(const TrainingArguments& run)> what_if = nullptr;
};

struct SwitchGroup {
  const char* name;  // the advisor's dimension name ("checkpointing")
  int advisor_rank;  // position among the advisor's dimensions, 0: not searched
  // The choices for `base`; `target_batch` (sequences per optimizer step) sizes the batch
  // splits, the what-if table passes the run's own.
  std::vector<Switch> (*choices)(const TrainingArguments& base, int64_t target_batch);
};

// Every group, in the what-if table's order.
const std::vector<SwitchGroup>& switch_groups();

}  // namespace snug

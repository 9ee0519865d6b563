// "What would each switch save?" Dry runs on the meta device (shapes only, the same code as a
// real run, so the bytes are exact) of the same training arguments with one memory switch that
// is off turned on: the report's answer to which flag to reach for when a run does not fit.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/memory.h"
#include "plan/dry_run.h"
#include "train/training_args.h"

namespace snug {

struct WhatIf {
  std::string flags;   // what to add to the command line, e.g. "--gradient-checkpointing"
  int64_t peak_bytes;  // the dry run's peak with it
};

// One row per switch of plan/switches.h whose what_if predicate holds for `args` (it is off
// there and would change memory), in that list's order; combinations the run's other flags rule
// out are left out. Each is a dry run with `data` (plan/dry_run.h; none: full rows).
std::vector<WhatIf> what_if(const TrainingArguments& args, const DryRunData& data = {});
// Text table: flags, peak, saving against `baseline_peak` (negative: costs more).
std::string what_if_table(const std::vector<WhatIf>& rows, int64_t baseline_peak);
nlohmann::json what_if_json(const std::vector<WhatIf>& rows, int64_t baseline_peak);

}  // namespace snug

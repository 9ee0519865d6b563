// What `snug plan` does beyond the plan itself, each behind its own flag: --find-max-batch and
// --find-max-seq-len (exact searches over dry runs, plan/fit_search.h), --memory-timeline
// (every allocation and free of the dry run, report/memory_timeline.h) and --advise (the fit
// advisor, plan/advisor.h). Kept apart from plan_command.cpp so that each grows on its own.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "train/training_args.h"

namespace snug::cli {

// The CUDA runtime's own footprint before any tensor (context and kernels): the seeds measured
// about 1343 MB on their V100, which nvidia-smi shows on top of the tensors. Added to the need
// whenever --device-memory names a GPU preset.
inline constexpr int64_t kCudaContextBytes = int64_t{1343} * 1024 * 1024;
// kCudaContextBytes for a GPU preset name, 0 for a plain size.
int64_t runtime_overhead_bytes(const std::string& device_memory);

struct PlanExtras {
  bool find_max_batch = false;
  bool find_max_seq_len = false;
  std::string memory_timeline;  // path, empty: none
  bool advise = false;
  int64_t target_batch = 0;  // --target-batch for --advise (0: the flags' B x accumulation)
  double gemm_gflops = 0;    // --gemm-gflops for --advise (0: measure this build's GEMM)
  int64_t advise_top = 10;   // rows listed
};

// Registers the flags on `plan`; `device_memory` is the --device-memory option they need.
void add_plan_extra_flags(CLI::App* plan, PlanExtras& x);

// Runs what the flags ask for, printing after the plan, and adds its results to `j` ("max_batch",
// "max_seq_len", "advice", ...). `args` is the plan's (device meta).
void run_plan_extras(const PlanExtras& x, const TrainingArguments& args,
                     const std::string& device_memory, nlohmann::json& j);

}  // namespace snug::cli

// What `snug plan` does beyond the plan itself, each behind its own flag: --find-max-batch and
// --find-max-seq-len (exact searches over dry runs, plan/fit_search.h), --memory-timeline
// (every allocation and free of the dry run, report/memory_timeline.h) and --advise (the fit
// advisor, plan/advisor.h). Kept apart from plan_command.cpp so that each grows on its own.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "plan/dry_run.h"
#include "plan/fit_search.h"
#include "train/training_args.h"

namespace snug::cli {

// The CUDA runtime's own footprint before any tensor (context and kernels): the seeds measured
// about 1343 MB on their V100, which nvidia-smi shows on top of the tensors. Added to the need
// whenever --device-memory names a GPU preset.
inline constexpr int64_t kCudaContextBytes = int64_t{1343} * 1024 * 1024;
// kCudaContextBytes for a GPU preset name, 0 for a plain size.
int64_t runtime_overhead_bytes(const std::string& device_memory);

// One device's verdict: the plan's tensors plus the runtime's footprint against its capacity.
struct Verdict {
  std::string device;
  int64_t capacity, overhead, need;
  bool fits() const { return need + overhead <= capacity; }
};
// The verdicts --device-memory (none when empty) and --all-gpus ask for, for tensors peaking at
// `need` bytes.
std::vector<Verdict> plan_verdicts(const std::string& device_memory, bool all_gpus, int64_t need);
void print_verdict(const Verdict& v);
nlohmann::json verdict_json(const Verdict& v);

// A --find-max-* search as plan prints it ("largest --seq-len that fits 24GB: 812 (peak ...)")
// and writes it in --json ("max_seq_len_search"). `cap_reason` says why a capped value stopped.
void print_search(const char* what, const FitSearchResult& r, const std::string& device,
                  int64_t overhead, const char* cap_reason);
nlohmann::json search_json(const FitSearchResult& r, int64_t capacity, int64_t overhead);
// Both: prints the search and sets j[key] (the value) and j[key + "_search"].
void report_search(nlohmann::json& j, const std::string& key, const std::string& what,
                   const FitSearchResult& r, const std::string& device, int64_t capacity,
                   int64_t overhead, const char* cap_reason);

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
// "max_seq_len", "advice", ...). `args` is the plan's (device meta), `data` what its dry run
// replayed (plan/dry_run.h): --find-max-batch, --advise and --memory-timeline replay it too;
// --find-max-seq-len assumes full rows (a jsonl example cut at one --seq-len is not the example
// cut at another), and says so when the plan replayed data.
void run_plan_extras(const PlanExtras& x, const TrainingArguments& args,
                     const std::string& device_memory, const DryRunData& data, nlohmann::json& j);

}  // namespace snug::cli

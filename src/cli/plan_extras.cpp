#include "cli/plan_extras.h"

#include <cmath>
#include <cstdio>

#include "cli/number_flag.h"
#include "core/device.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/parallel.h"
#include "kernels/backends.h"
#include "kernels/peak.h"
#include "plan/advisor.h"
#include "plan/fit_search.h"
#include "plan/what_if.h"
#include "plan/zero_states.h"
#include "report/memory_timeline.h"
#include "report/report.h"

namespace snug::cli {

namespace {

void run_advisor(const PlanExtras& x, const TrainingArguments& args,
                 const std::string& device_memory, const DryRunData& data, nlohmann::json& j) {
  SNUG_CHECK(x.target_batch >= 0, "--target-batch must be positive, got ", x.target_batch);
  SNUG_CHECK(x.gemm_gflops >= 0, "--gemm-gflops must be positive, got ", x.gemm_gflops);
  SNUG_CHECK(x.advise_top > 0, "--advise-top must be positive, got ", x.advise_top);
  AdvisorOptions o;
  o.target_batch = x.target_batch;
  o.capacity = parse_device_memory(device_memory);
  o.overhead = runtime_overhead_bytes(device_memory);
  o.data = data;
  const bool measured = x.gemm_gflops == 0;
  if (measured) set_num_threads(args.threads);
  o.gemm_flops = measured ? kernels::measure_gemm_peak_flops(512, 0.3) : x.gemm_gflops * 1e9;
  // The 16-bit precisions' GEMMs: oneDNN's bf16 matmul, measured on its own (--gemm-gflops
  // gives no rate for it: the same as fp32's then), or fp32's with the widening passes.
  o.bf16_path = kernels::resolve_gemm_path(args.gemm_path);
  const bool bf16_matmul = o.bf16_path == kernels::GemmPath::onednn_bf16;
  if (bf16_matmul && measured)
    o.bf16_gemm_flops = kernels::measure_gemm_peak_flops(512, 0.3, kernels::GemmPath::onednn_bf16);
  const AdvisorResult r = advise(args, o);
  char bf16[160];
  if (bf16_matmul)
    std::snprintf(bf16, sizeof bf16, "bf16 at %.0f GFLOP/s on onednn-bf16",
                  (o.bf16_gemm_flops > 0 ? o.bf16_gemm_flops : o.gemm_flops) / 1e9);
  else
    std::snprintf(bf16, sizeof bf16, "bf16 widened to fp32, +%.0f%%", 100.0 * kWidenedStepOverhead);
  const std::string rank =
      r.world_size > 1 ? " (rank 0 of " + std::to_string(r.world_size) + ")" : std::string();
  std::printf(
      "\nfit advisor: %lld configurations of %lld sequences x %lld tokens per step tried on %s%s, "
      "%zu fit (%lld more refused by a real run's rules); step time from FLOPs at %.0f GFLOP/s "
      "(%s; %s)\n",
      static_cast<long long>(r.tried), static_cast<long long>(r.target_batch),
      static_cast<long long>(args.seq_len), device_memory.c_str(), rank.c_str(), r.fitting.size(),
      static_cast<long long>(r.refused), o.gemm_flops / 1e9,
      measured ? "this build's GEMM, measured" : "--gemm-gflops", bf16);
  if (cuda_index(args.kernels_device()).has_value())  // the planned device (args.device is meta)
    std::printf(
        "(--device cuda: each peak is the GPU run's; the step times, and so the order, are this "
        "host's CPU GEMM rates, not the GPU's)\n");
  const size_t top = static_cast<size_t>(x.advise_top);
  if (r.fitting.empty()) {
    std::printf("nothing fits: try a smaller --seq-len or --target-batch, or more memory\n");
  } else {
    std::printf("run: %s\n\n%s",
                train_command_line(r.fitting.front().args, device_memory, r.world_size).c_str(),
                advice_table(r, o.capacity, o.overhead, top).c_str());
  }
  // World size and ZeRO stage (issue 30): how many ranks the run's own flags need at each stage.
  const auto fits = zero_fits(args, data, o.capacity, o.overhead);
  std::printf("\n%s", zero_fits_table(fits, 1024).c_str());
  j["advice"] = advice_json(r, device_memory, top);
  j["advice"]["zero"] = zero_fits_json(fits);
  // The same with a switch that changes what the ranks shard (bf16 weights: an fp32 run whose
  // replicated weights fit no stage-1/2 world may fit as --bf16-full).
  j["advice"]["zero_with"] = nlohmann::json::array();
  for (const auto& [flags, a] : zero_alternatives(args)) {
    const auto alt = zero_fits(a, data, o.capacity, o.overhead);
    std::printf("\n%s", zero_fits_table(alt, 1024, flags).c_str());
    j["advice"]["zero_with"].push_back({{"flags", flags}, {"rows", zero_fits_json(alt)}});
  }
  j["advice"]["gemm_flops"] = o.gemm_flops;
  j["advice"]["bf16_gemm_path"] = kernels::gemm_path_name(o.bf16_path);
  j["advice"]["bf16_step_factor"] =
      bf16_matmul ? o.gemm_flops / (o.bf16_gemm_flops > 0 ? o.bf16_gemm_flops : o.gemm_flops)
                  : 1.0 + kWidenedStepOverhead;
}

}  // namespace

nlohmann::json search_json(const FitSearchResult& r, int64_t capacity, int64_t overhead) {
  nlohmann::json j = {{"value", r.value},           {"peak_bytes", r.peak_bytes},
                      {"capacity_bytes", capacity}, {"runtime_overhead_bytes", overhead},
                      {"capped", r.capped},         {"dry_runs", r.dry_runs}};
  if (!r.capped) {
    j["above"] = r.above;
    j["above_peak_bytes"] = r.above_peak;
  }
  return j;
}

void print_search(const char* what, const FitSearchResult& r, const std::string& device,
                  int64_t overhead, const char* cap_reason) {
  const char* plus = overhead > 0 ? " + runtime" : "";
  if (r.value == 0) {
    std::printf("%s: none fits %s: even 1 needs %.1f MiB%s\n", what, device.c_str(),
                mib(r.peak_bytes + overhead), plus);
    return;
  }
  std::printf("%s that fits %s: %lld (peak %.1f MiB%s", what, device.c_str(),
              static_cast<long long>(r.value), mib(r.peak_bytes + overhead), plus);
  if (r.capped)
    std::printf("; %s)", cap_reason);
  else
    std::printf("; %lld needs %.1f MiB)", static_cast<long long>(r.above),
                mib(r.above_peak + overhead));
  std::printf(" - %lld dry runs\n", static_cast<long long>(r.dry_runs));
}

void report_search(nlohmann::json& j, const std::string& key, const std::string& what,
                   const FitSearchResult& r, const std::string& device, int64_t capacity,
                   int64_t overhead, const char* cap_reason) {
  print_search(what.c_str(), r, device, overhead, cap_reason);
  j[key] = r.value;
  j[key + "_search"] = search_json(r, capacity, overhead);
}

std::vector<Verdict> plan_verdicts(const std::string& device_memory, bool all_gpus, int64_t need) {
  std::vector<Verdict> verdicts;
  if (!device_memory.empty())
    verdicts.push_back({device_memory, parse_device_memory(device_memory),
                        runtime_overhead_bytes(device_memory), need});
  if (all_gpus)
    for (const auto& [name, bytes] : device_memory_presets())
      verdicts.push_back({name, bytes, kCudaContextBytes, need});
  return verdicts;
}

void print_verdict(const Verdict& v) {
  std::printf(
      "%-14s capacity %9.0f MiB  need %9.0f MiB (tensors %.0f + runtime %.0f)  %s %.0f MiB\n",
      v.device.c_str(), mib(v.capacity), mib(v.need + v.overhead), mib(v.need), mib(v.overhead),
      v.fits() ? "fits, headroom" : "DOES NOT FIT, short by",
      mib(std::abs(v.capacity - v.need - v.overhead)));
}

nlohmann::json verdict_json(const Verdict& v) {
  return {{"device", v.device},
          {"capacity_bytes", v.capacity},
          {"runtime_overhead_bytes", v.overhead},
          {"need_bytes", v.need + v.overhead},
          {"fits", v.fits()},
          {"headroom_bytes", v.capacity - v.need - v.overhead}};
}

int64_t runtime_overhead_bytes(const std::string& device_memory) {
  return is_device_memory_preset(device_memory) ? kCudaContextBytes : 0;
}

void add_plan_extra_flags(CLI::App* plan, PlanExtras& x) {
  CLI::Option* dm = plan->get_option("--device-memory");
  plan->add_flag("--find-max-batch", x.find_max_batch,
                 "Find the largest --per-device-train-batch-size that fits --device-memory "
                 "(exact: a search over dry runs)")
      ->needs(dm);
  plan->add_flag("--find-max-seq-len", x.find_max_seq_len,
                 "Find the largest --seq-len (up to the model's n_positions) that fits "
                 "--device-memory (exact: a search over dry runs)")
      ->needs(dm);
  plan->add_flag("--advise", x.advise,
                 "Fit advisor: try batch/accumulation splits of --target-batch, checkpoint "
                 "policies and optimizers; list those that fit --device-memory, fastest first")
      ->needs(dm);
  add_number_flag(plan, "--target-batch", x.target_batch, NumberRange::integer(1, kMaxFlagCount),
                  "--advise: sequences per optimizer step (default: batch x accumulation)");
  add_number_flag(plan, "--gemm-gflops", x.gemm_gflops, NumberRange::real(0, 1e9, true),
                  "--advise: GEMM rate for the step-time estimate (default: measured now)");
  add_number_flag(plan, "--advise-top", x.advise_top, NumberRange::integer(1, 100000),
                  "--advise: rows to list");
  plan->add_option("--memory-timeline", x.memory_timeline,
                   "Write every allocation and free of the dry run (category, size, step, "
                   "phase) as JSON to this path; draw it with `snug plot-memory`");
}

void run_plan_extras(const PlanExtras& x, const TrainingArguments& args,
                     const std::string& device_memory, const DryRunData& data, nlohmann::json& j) {
  const bool replayed = data.train != nullptr;
  if (x.find_max_batch || x.find_max_seq_len) {
    SNUG_CHECK(!device_memory.empty(), "--find-max-batch/--find-max-seq-len need --device-memory");
    const int64_t capacity = parse_device_memory(device_memory);
    const int64_t overhead = runtime_overhead_bytes(device_memory);
    std::printf("\n");
    if (x.find_max_batch) {
      // 2^20 sequences per device: far past any capacity, a bound for the doubling only.
      const FitSearchResult r =
          find_max_fit(args, FitDimension::batch, capacity, overhead, int64_t{1} << 20, data);
      report_search(j, "max_batch", "largest --per-device-train-batch-size", r, device_memory,
                    capacity, overhead, "the search's bound");
    }
    if (x.find_max_seq_len) {
      const int64_t n_positions = args.model_config().shape.n_positions;
      const FitSearchResult r =
          find_max_fit(args, FitDimension::seq_len, capacity, overhead, n_positions,
                       DryRunData{.world_size = data.world_size});
      report_search(j, "max_seq_len", "largest --seq-len", r, device_memory, capacity, overhead,
                    "the model's n_positions; --n-positions raises it");
      if (replayed) std::printf("  (--find-max-seq-len assumes full rows: no data replayed)\n");
    }
  }
  if (x.advise) run_advisor(x, args, device_memory, data, j);
  if (!x.memory_timeline.empty()) {
    std::vector<MemoryEvent> events;
    const DryRun d = replay(args, data, &events);
    write_json_file(x.memory_timeline, timeline_json(events, d.memory, "meta", describe_run(args)));
    std::printf("memory timeline (%zu events, %lld steps) written to %s\n", events.size(),
                static_cast<long long>(d.batches.steps), x.memory_timeline.c_str());
  }
}

}  // namespace snug::cli

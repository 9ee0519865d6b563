// `snug estimate`: the closed-form memory estimate (plan/estimate.h: bytes per parameter as the
// Hugging Face calculator and accelerate count them, activations by Korthikanti et al.) printed
// beside the exact figures of a dry run of the same flags, with their ratio per category; then
// ZeRO's per-rank model states for stages 0-3 over --world-size ranks (plan/zero_states.h), the
// dry run's own beside the run's --zero-stage (a replay of rank 0 of that world).
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/number_flag.h"
#include "core/error.h"
#include "models/registry.h"
#include "plan/dry_run.h"
#include "plan/estimate.h"
#include "plan/what_if.h"
#include "plan/zero_states.h"
#include "report/report.h"
#include "train/training_args.h"

namespace snug::cli {

namespace {

// Weights + gradients + optimizer state, each category's own maximum; at ZeRO stage 3 the
// weights a rank keeps at the end of its step (its shards, no block gathered), since a rank builds
// the model whole before partitioning it and its largest weights are one process's
// (docs/distributed.md, stage 3).
int64_t model_states(const MemoryStats& m, bool shards) {
  auto at = [&](Category c) { return m.max_by_category[static_cast<int>(c)]; };
  const int64_t weights =
      shards ? m.live[static_cast<int>(Category::weights)] : at(Category::weights);
  return weights + at(Category::gradients) + at(Category::optimizer_state);
}

int run_estimate(TrainingArguments args, const std::string& json_path, int64_t world) {
  const ModelConfig cfg = prepare_dry_run(args);
  const MemoryEstimate est = estimate_memory(args);
  const MemoryStats plan = dry_run(args);
  std::printf("snug estimate: %s (%.2fM parameters, %.2fM trainable), %s\n\n",
              cfg.shape.name.c_str(), static_cast<double>(est.params) / 1e6,
              static_cast<double>(est.trainable_params) / 1e6, describe_step(args).c_str());
  std::printf("%s", estimate_table(est, plan).c_str());
  // The plan beside ZeRO's formulas: this run's stage over `world` ranks (rank 0's replay).
  const bool sharded = world > 1 || args.zero_stage > 0;
  const int64_t plan_states = model_states(
      sharded ? replay(args, DryRunData{.world_size = static_cast<int>(world)}).memory : plan,
      args.zero_stage == 3);
  std::printf("\n%s", zero_states_table(est, world, args.zero_stage, plan_states).c_str());
  if (!json_path.empty()) {
    nlohmann::json j;
    j["config"] = args.to_json();
    j["estimate"] = estimate_json(est, plan);
    j["estimate"]["zero"] = zero_states_json(est, world, args.zero_stage, plan_states);
    j["memory"] = dry_run_memory_json(plan);
    write_json_file(json_path, j);
  }
  return 0;
}

}  // namespace

Command add_estimate_command(CLI::App& app) {
  const auto c = add_training_subcommand(
      app, "estimate",
      "Closed-form memory estimate (HF calculator + Korthikanti activations) beside the exact "
      "dry run, and ZeRO's per-rank model states for stages 0-3");
  auto json_path = std::make_shared<std::string>();
  c.sub->add_option("--json", *json_path, "Write the estimate and the plan as JSON to this path");
  auto world = std::make_shared<int64_t>(1);
  add_number_flag(c.sub, "--world-size", *world, NumberRange::integer(1, 1 << 20),
                  "Ranks for ZeRO's per-rank formulas (and the replay of rank 0 at --zero-stage)");
  return {c.sub,
          [t = c.flags, json_path, world] { return run_estimate(t->args, *json_path, *world); }};
}

}  // namespace snug::cli

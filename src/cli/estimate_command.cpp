// `snug estimate`: the closed-form memory estimate (plan/estimate.h: bytes per parameter as the
// Hugging Face calculator and accelerate count them, activations by Korthikanti et al.) printed
// beside the exact figures of a dry run of the same flags, with their ratio per category.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "models/registry.h"
#include "plan/estimate.h"
#include "plan/what_if.h"
#include "report/report.h"
#include "train/training_args.h"

namespace snug::cli {

namespace {

int run_estimate(TrainingArguments args, const std::string& json_path) {
  const ModelConfig cfg = prepare_dry_run(args);
  const MemoryEstimate est = estimate_memory(args);
  const MemoryStats plan = dry_run(args);
  std::printf("snug estimate: %s (%.2fM parameters, %.2fM trainable), %s\n\n",
              cfg.shape.name.c_str(), static_cast<double>(est.params) / 1e6,
              static_cast<double>(est.trainable_params) / 1e6, describe_step(args).c_str());
  std::printf("%s", estimate_table(est, plan).c_str());
  if (!json_path.empty()) {
    nlohmann::json j;
    j["config"] = args.to_json();
    j["estimate"] = estimate_json(est, plan);
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
      "dry run");
  auto json_path = std::make_shared<std::string>();
  c.sub->add_option("--json", *json_path, "Write the estimate and the plan as JSON to this path");
  return {c.sub, [t = c.flags, json_path] { return run_estimate(t->args, *json_path); }};
}

}  // namespace snug::cli

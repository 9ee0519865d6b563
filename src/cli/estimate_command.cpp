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
  args.device = "meta";
  args.device_memory.reset();
  args.validate();
  const ModelConfig cfg = args.model_config();
  SNUG_CHECK(args.seq_len <= cfg.shape.n_positions, "--seq-len ", args.seq_len, " exceeds ",
             cfg.shape.name, "'s context of ", cfg.shape.n_positions, " positions");
  const MemoryEstimate est = estimate_memory(args);
  const MemoryStats plan = dry_run(args);
  std::printf(
      "snug estimate: %s (%.2fM parameters, %.2fM trainable), batch %lld x %lld tokens, "
      "accumulation %lld, %s, %s\n\n",
      cfg.shape.name.c_str(), static_cast<double>(est.params) / 1e6,
      static_cast<double>(est.trainable_params) / 1e6,
      static_cast<long long>(args.per_device_train_batch_size),
      static_cast<long long>(args.seq_len),
      static_cast<long long>(args.gradient_accumulation_steps), args.optim.c_str(),
      args.fp16        ? "fp16 mixed precision"
      : args.bf16_full ? "bf16 weights, gradients and state (--bf16-full)"
      : args.bf16      ? "bf16 mixed precision"
                       : "fp32");
  std::printf("%s", estimate_table(est, plan).c_str());
  if (!json_path.empty()) {
    nlohmann::json j;
    j["config"] = args.to_json();
    j["estimate"] = estimate_json(est, plan);
    j["memory"] = memory_json(plan, std::nullopt);
    j["memory"].erase("peak_rss_bytes");
    write_json_file(json_path, j);
  }
  return 0;
}

}  // namespace

Command add_estimate_command(CLI::App& app) {
  auto args = std::make_shared<TrainingArguments>();
  auto device_memory = std::make_shared<std::string>();
  auto json_path = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand(
      "estimate",
      "Closed-form memory estimate (HF calculator + Korthikanti activations) beside the exact "
      "dry run");
  add_training_flags(sub, *args, *device_memory);
  sub->add_option("--json", *json_path, "Write the estimate and the plan as JSON to this path");
  Command c;
  c.sub = sub;
  c.run = [=]() { return run_estimate(*args, *json_path); };
  return c;
}

}  // namespace snug::cli

// What the subcommands share (cli/commands.h).
#include "cli/commands.h"

#include <optional>

#include "core/error.h"
#include "report/report.h"

namespace snug::cli {

Subcommand<TrainingFlags> add_training_subcommand(CLI::App& app, const std::string& name,
                                                  const std::string& description) {
  Subcommand<TrainingFlags> c = add_subcommand<TrainingFlags>(app, name, description);
  add_training_flags(c.sub, c.flags->args, c.flags->device_memory);
  return c;
}

void check_seq_len(int64_t seq_len, const ModelConfig& cfg) {
  SNUG_CHECK(seq_len <= cfg.shape.n_positions, "--seq-len ", seq_len, " exceeds ", cfg.shape.name,
             "'s context of ", cfg.shape.n_positions, " positions");
}

ModelConfig prepare_dry_run(TrainingArguments& args) {
  args.device = "meta";
  args.device_memory.reset();
  args.validate();
  ModelConfig cfg = args.model_config();
  check_seq_len(args.seq_len, cfg);
  return cfg;
}

std::string describe_step(const TrainingArguments& args) {
  const char* precision = args.fp16        ? "fp16 mixed precision"
                          : args.bf16_full ? "bf16 weights, gradients and state (--bf16-full)"
                          : args.bf16      ? "bf16 mixed precision"
                                           : "fp32";
  return detail::concat("batch ", args.per_device_train_batch_size, " x ", args.seq_len,
                        " tokens, accumulation ", args.gradient_accumulation_steps, ", ",
                        args.optim, ", ", precision);
}

nlohmann::json dry_run_memory_json(const MemoryStats& m) {
  nlohmann::json j = memory_json(m, std::nullopt);
  j.erase("peak_rss_bytes");
  return j;
}

}  // namespace snug::cli

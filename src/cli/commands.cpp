// What the subcommands share (cli/commands.h).
#include "cli/commands.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>

#include "cli/number_flag.h"
#include "core/error.h"
#include "dist/make_communicator.h"
#include "io/excerpt.h"
#include "report/report.h"
#include "train/deepspeed_config.h"
#include "train/flag_table.h"

namespace snug::cli {

Subcommand<TrainingFlags> add_training_subcommand(CLI::App& app, const std::string& name,
                                                  const std::string& description) {
  Subcommand<TrainingFlags> c = add_subcommand<TrainingFlags>(app, name, description);
  add_training_flags(c.sub, c.flags->args, c.flags->device_memory);
  // --deepspeed: the file's keys set the flags once the command line is parsed, so that a value
  // contradicting a flag given there is refused naming both (train/deepspeed_config.h).
  c.sub->parse_complete_callback([sub = c.sub, flags = c.flags] {
    TrainingArguments& a = flags->args;
    if (a.deepspeed.empty()) return;
    std::set<std::string> given;
    for (const TrainingFlag& f : training_flags()) {
      if (f.key.empty()) continue;
      const CLI::Option* o = sub->get_option_no_throw(f.name());
      if (o != nullptr && o->count() > 0) given.insert(f.key);
    }
    const dist::Launch launch = dist::detect_launch([](const char* n) { return std::getenv(n); });
    apply_deepspeed_file(given, std::max(1, launch.world_size), a);
  });
  return c;
}

void check_seq_len(int64_t seq_len, const ModelConfig& cfg) {
  SNUG_CHECK(seq_len <= cfg.shape.n_positions, "--seq-len ", seq_len, " exceeds ", cfg.shape.name,
             "'s context of ", cfg.shape.n_positions, " positions");
}

ModelConfig prepare_dry_run(TrainingArguments& args) {
  args.kernel_device = args.kernels_device();  // the planned device's kernel choices, replayed
  args.device = "meta";
  args.device_memory.reset();
  args.validate();
  ModelConfig cfg = args.model_config();
  check_seq_len(args.seq_len, cfg);
  return cfg;
}

void add_max_new_tokens_flag(CLI::App* sub, int64_t& max_new_tokens) {
  add_number_flag(sub, "--max-new-tokens", max_new_tokens, NumberRange::integer(1, 1 << 24),
                  "New tokens at most");
}

void add_num_beams_flag(CLI::App* sub, int64_t& num_beams) {
  add_number_flag(sub, "--num-beams", num_beams, NumberRange::integer(1, 256),
                  "Beam search with this many beams");
}

namespace {

const char* half_name(DType d) {
  return d == DType::f16 ? "fp16" : "bf16";
}

}  // namespace

std::string precision_words(const TrainingArguments& args) {
  const DType storage = args.param_dtype();
  if (storage != DType::f32 && args.lora_r > 0)
    return detail::concat(half_name(storage), " base, fp32 LoRA adapters");
  const ComputeDType c = args.compute_dtype();
  return c == ComputeDType::f16 ? "fp16 mixed precision"
         : args.bf16_full       ? "bf16 weights, gradients and state (--bf16-full)"
         : args.master_weights()
             ? "bf16 weights and gradients, fp32 master and state (--precision-layout deepspeed)"
         : c == ComputeDType::bf16 ? "bf16 mixed precision"
                                   : "fp32";
}

std::string generation_precision_words(const TrainingArguments& args) {
  const DType storage = args.generation_param_dtype();
  const ComputeDType c = args.compute_dtype();
  if (storage != DType::f32) return detail::concat(half_name(storage), " weights and KV cache");
  if (c == ComputeDType::f32) return "fp32";
  const char* h = c == ComputeDType::f16 ? "fp16" : "bf16";
  return detail::concat(h, " mixed precision (fp32 weights + ", h, " compute copies, ", h,
                        " KV cache)");
}

std::string describe_step(const TrainingArguments& args) {
  return detail::concat("batch ", args.per_device_train_batch_size, " x ", args.seq_len,
                        " tokens, accumulation ", args.gradient_accumulation_steps, ", ",
                        args.optim, ", ", precision_words(args));
}

void add_folder_flags(CLI::App* sub, FolderFlags& f) {
  sub->add_option("--dtype", f.dtype,
                  "With -o DIR: the dtype of the folder's tensors and config.json, f32, bf16 or "
                  "f16 (default: the run's parameters', bf16 under --bf16-full, else f32)");
  sub->add_option("--max-shard-size", f.max_shard_size,
                  "With -o DIR: split the weights into model-0000K-of-0000N.safetensors shards "
                  "of at most this size, with model.safetensors.index.json, as transformers' "
                  "max_shard_size (bytes, or e.g. 500MB, 2GB, 1GiB; default 5GB)");
}

HfFolderOptions folder_options(const FolderFlags& f, DType param_dtype, const std::string& output) {
  HfFolderOptions o;
  const bool folder = is_folder_output(output);
  SNUG_CHECK(folder || (f.dtype.empty() && f.max_shard_size.empty()),
             f.dtype.empty() ? "--max-shard-size" : "--dtype",
             " applies to a model folder (-o DIR), not to the file ", output);
  o.dtype = param_dtype;
  if (!f.dtype.empty()) {
    DType t = DType::f32;
    try {
      t = parse_dtype(f.dtype);
    } catch (const std::exception&) {
      t = DType::i8;  // refused below with the flag's message
    }
    SNUG_CHECK(t == DType::f32 || t == DType::bf16 || t == DType::f16, "--dtype '",
               excerpt(f.dtype), "': a model folder stores f32, bf16 or f16 tensors");
    o.dtype = t;
  }
  if (!f.max_shard_size.empty())
    o.max_shard_bytes = parse_shard_size(f.max_shard_size, "--max-shard-size");
  return o;
}

nlohmann::json dry_run_memory_json(const MemoryStats& m) {
  nlohmann::json j = memory_json(m, std::nullopt);
  j.erase("peak_rss_bytes");
  return j;
}

}  // namespace snug::cli

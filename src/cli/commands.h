// Each subcommand registers its flags on the app and returns how to run it once parsed.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/memory.h"
#include "models/hf_folder.h"
#include "models/model_config.h"
#include "train/training_args.h"

namespace snug::cli {

// Registers every TrainingArguments flag on `sub`; --device-memory lands in `device_memory`
// (parsed later, so that presets and sizes share one message on error).
void add_training_flags(CLI::App* sub, TrainingArguments& a, std::string& device_memory);

struct Command {
  CLI::App* sub = nullptr;
  std::function<int()> run;
};

// A subcommand and the values its flags parse into. CLI11 writes them while parsing, after
// add_*_command has returned, so they live behind a shared_ptr that the run closure keeps.
template <class Flags>
struct Subcommand {
  CLI::App* sub = nullptr;
  std::shared_ptr<Flags> flags;
};
template <class Flags>
Subcommand<Flags> add_subcommand(CLI::App& parent, const std::string& name,
                                 const std::string& description) {
  return {parent.add_subcommand(name, description), std::make_shared<Flags>()};
}

// What the training commands (train, plan, estimate, export-init, export) parse.
struct TrainingFlags {
  TrainingArguments args;
  std::string device_memory;  // --device-memory as given: a size or a GPU preset
};
// A subcommand with every training flag (add_training_flags); the command adds its own after.
Subcommand<TrainingFlags> add_training_subcommand(CLI::App& app, const std::string& name,
                                                  const std::string& description);

// The generation flags that `snug generate` and `snug plan --inference` share, registered by
// both through these (one name, help and default).
void add_max_new_tokens_flag(CLI::App* sub, int64_t& max_new_tokens);
void add_num_beams_flag(CLI::App* sub, int64_t& num_beams);

// The precision of a training run in words: "fp32", "bf16 mixed precision", "bf16 base, fp32
// LoRA adapters", ...
std::string precision_words(const TrainingArguments& args);
// The precision of a generation in words (train/training_args.h generation_param_dtype()):
// "fp32", "bf16 weights and KV cache", "bf16 mixed precision (fp32 weights + bf16 compute
// copies, bf16 KV cache)".
std::string generation_precision_words(const TrainingArguments& args);

// --seq-len against the model's context, with one message for every command.
void check_seq_len(int64_t seq_len, const ModelConfig& cfg);
// `args` made a dry run's (meta device, no modelled capacity) and validated; its model, with
// --seq-len checked. plan and estimate start here.
ModelConfig prepare_dry_run(TrainingArguments& args);
// One optimizer step of `args` for plan's and estimate's headline: "batch 8 x 128 tokens,
// accumulation 1, adamw_torch, fp32".
std::string describe_step(const TrainingArguments& args);
// A dry run's memory in plan's and estimate's JSON: report/report.h's memory_json without
// peak_rss_bytes (a dry run allocates nothing, so the process's RSS says nothing about it).
nlohmann::json dry_run_memory_json(const MemoryStats& m);

// --dtype and --max-shard-size of the commands whose -o may name a Hugging Face model folder
// (export, export-init).
struct FolderFlags {
  std::string dtype;           // "" : the parameters' storage dtype
  std::string max_shard_size;  // "" : transformers' 5GB
};
void add_folder_flags(CLI::App* sub, FolderFlags& f);
// The folder options of these flags for a model stored as `param_dtype` (f32, or bf16 under
// --bf16-full); `output` is -o. Only a folder output takes them: either flag with
// FILE.safetensors is an error naming it.
HfFolderOptions folder_options(const FolderFlags& f, DType param_dtype, const std::string& output);

Command add_train_command(CLI::App& app);
Command add_plan_command(CLI::App& app);
Command add_bench_command(CLI::App& app);        // `snug bench seeds`
Command add_export_init_command(CLI::App& app);  // `snug export-init`
Command add_quantize_command(CLI::App& app);     // `snug quantize`
Command add_plot_memory_command(CLI::App& app);  // `snug plot-memory`
Command add_estimate_command(CLI::App& app);     // `snug estimate`
Command add_peft_export_command(CLI::App& app);  // `snug export` (--adapter, --merge)
Command add_info_command(CLI::App& app);         // `snug info`
Command add_tokenize_command(CLI::App& app);     // `snug tokenize`
Command add_generate_command(CLI::App& app);     // `snug generate`

}  // namespace snug::cli

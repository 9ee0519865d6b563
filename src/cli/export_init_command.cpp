// `snug export-init`: writes what a `snug train` run with the same flags starts from and reads,
// so that another engine can do exactly the same work (bench/peers/):
//   -o FILE.safetensors   the initial weights (the family's Hugging Face names and layouts;
//                         models/registry.h): init_weights(--seed), --init-from, or the --model
//                         folder's weights (train/model_setup.h)
//   -o DIR                the same as a Hugging Face model folder (models/hf_folder.h), with
//                         --dtype and --max-shard-size
//   --batches-out FILE    the token windows the run's data loader yields, in the order it yields
//                         them: max_steps x gradient_accumulation_steps x batch windows of
//                         seq_len + 1 tokens each, as a token file (data/dataset.h). Window k's
//                         first seq_len tokens are micro-batch row k's inputs, its last seq_len
//                         its targets; rows k..k+B-1 form one micro-batch.
// It takes every training flag so that a caller passes the same flags to both commands.
#include <cstdio>
#include <map>
#include <memory>

#include "cli/commands.h"
#include "core/device.h"
#include "core/error.h"
#include "core/parallel.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/sft_data.h"
#include "kernels/backends.h"
#include "models/hf_folder.h"
#include "models/registry.h"
#include "train/model_setup.h"
#include "train/training_args.h"

namespace snug::cli {

namespace {

struct ExportFlags {
  std::string output;
  std::string batches_out;
  FolderFlags folder;
};

void export_batches(const TrainingArguments& args, const ModelConfig& cfg,
                    const std::string& path) {
  SNUG_CHECK(args.max_steps > 0,
             "--batches-out needs --max-steps (the number of optimizer steps "
             "whose batches to write)");
  SNUG_CHECK(args.resume_from.empty(),
             "--batches-out: a resumed run's batches are not written "
             "(drop --resume-from)");
  SNUG_CHECK(!is_jsonl_spec(args.data), "--batches-out: --data ", args.data,
             " is jsonl records; only token streams (builtin, dummy, token and text files) are "
             "written as batches");
  const auto data = open_dataset(args.data, cfg.shape.vocab_size, args.seed);
  const int64_t B = args.per_device_train_batch_size, T = args.seq_len;
  DataLoader loader(*data, B, T, args.seed);  // the Trainer's loader, from epoch 0
  const int64_t batches = args.max_steps * args.gradient_accumulation_steps;
  std::vector<int32_t> inputs(static_cast<size_t>(B * T)), targets(inputs.size());
  std::vector<int32_t> windows;
  windows.reserve(static_cast<size_t>(batches * B * (T + 1)));
  for (int64_t i = 0; i < batches; ++i) {
    loader.next(inputs.data(), targets.data());
    for (int64_t b = 0; b < B; ++b) {
      windows.insert(windows.end(), inputs.begin() + b * T, inputs.begin() + (b + 1) * T);
      windows.push_back(targets[static_cast<size_t>((b + 1) * T - 1)]);
    }
  }
  write_token_file(path, windows, cfg.shape.vocab_size <= 65536 ? 2 : 4);
  std::printf("snug: wrote %lld batches of %lld x %lld tokens (+1 target each) from %s to %s\n",
              static_cast<long long>(batches), static_cast<long long>(B), static_cast<long long>(T),
              data->describe().c_str(), path.c_str());
}

int run_export(const TrainingArguments& args, const ExportFlags& f) {
  args.validate();
  SNUG_CHECK(!f.output.empty() || !f.batches_out.empty(),
             "snug export-init: give -o FILE.safetensors and/or --batches-out FILE");
  set_num_threads(args.threads);
  const ModelConfig cfg = args.model_config();  // --model with the shape flags and overrides
  check_seq_len(args.seq_len, cfg);
  if (!f.output.empty()) {
    const HfFolderOptions fo = folder_options(f.folder, args.param_dtype(), f.output);
    Device dev(cpu_backend());
    const auto owned = create_model(cfg, dev, args.param_dtype());  // --bf16-full: bf16-rounded
    Model& model = *owned;
    TrainingArguments start = args;
    start.resume_from.clear();  // the weights the run would start from without a checkpoint
    const std::string from = load_initial_weights(model, start, cfg);
    const std::map<std::string, std::string> meta = {{"seed", std::to_string(args.seed)},
                                                     {"snug_version", SNUG_VERSION}};
    if (is_folder_output(f.output)) {
      HfFolderOptions o = fo;
      o.metadata = meta;
      const HfFolderWritten w = save_hf_folder(f.output, hf_config_json(cfg, o.dtype),
                                               hf_model_tensors(model), cfg.folder, o);
      std::printf(
          "snug: wrote the initial weights of %s (%.2fM parameters, %s) as a Hugging Face "
          "model folder to %s (%s, %zu weight file%s%s)\n",
          cfg.shape.name.c_str(), static_cast<double>(count_params(model.parameters())) / 1e6,
          from.c_str(), f.output.c_str(), dtype_name(o.dtype), w.weight_files.size(),
          w.weight_files.size() == 1 ? "" : "s",
          w.side_files.empty() ? "" : ", tokenizer files copied");
    } else {
      save_model_weights(model, f.output, meta);
      std::printf("snug: wrote the initial weights of %s (%.2fM parameters, %s) to %s\n",
                  cfg.shape.name.c_str(),
                  static_cast<double>(count_params(model.parameters())) / 1e6, from.c_str(),
                  f.output.c_str());
    }
  }
  if (!f.batches_out.empty()) export_batches(args, cfg, f.batches_out);
  return 0;
}

}  // namespace

Command add_export_init_command(CLI::App& app) {
  const auto c = add_training_subcommand(
      app, "export-init",
      "Write the initial weights (safetensors, Hugging Face names) and the token batches that "
      "`snug train` with the same flags starts from and reads");
  CLI::App* sub = c.sub;
  auto flags = std::make_shared<ExportFlags>();
  sub->add_option("-o,--output", flags->output,
                  "Write the initial weights here: FILE.safetensors (Hugging Face names), or a "
                  "Hugging Face model folder (any other path: config.json, safetensors shards, "
                  "the --model folder's tokenizer files)");
  add_folder_flags(sub, flags->folder);
  sub->add_option("--batches-out", flags->batches_out,
                  "Write the token windows the run reads, in order, as a token file");
  return {sub, [t = c.flags, flags] { return run_export(t->args, *flags); }};
}

}  // namespace snug::cli

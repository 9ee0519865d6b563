// `snug export`: a LoRA run's adapters for the Hugging Face stack (peft/peft_export.h).
//   --adapter -o DIR            DIR/adapter_config.json + DIR/adapter_model.safetensors, as PEFT's
//                               save_pretrained writes them (PeftModel.from_pretrained loads it)
//   --merge -o DIR              the merged model as a Hugging Face model folder (models/
//                               hf_folder.h: config.json, model.safetensors or shards of at most
//                               --max-shard-size with their index, the --model folder's
//                               tokenizer files; tensors --dtype, default the base's storage),
//                               what merge_and_unload + save_pretrained gives;
//                               AutoModelForCausalLM.from_pretrained and `snug train --model`
//                               load it. Without --lora-r: the model's own weights (a full
//                               fine-tune's checkpoint, or the starting weights)
//   --merge -o FILE.safetensors the merged full weights in one F32 file (`--init-from` reads it)
//   --checkpoint DIR            the values: a checkpoint folder, or an output dir (its latest
//                               complete checkpoint); without it, the freshly initialized adapters
// It takes every training flag and builds the model as `snug train` does with them (--model and
// shape flags, --init-from, --load-in-4bit..., --lora-r, --lora-alpha, --target-modules,
// --use-rslora, --seed), so that the export is given the run's own flags.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "core/device.h"
#include "core/error.h"
#include "core/parallel.h"
#include "kernels/backends.h"
#include "models/hf_folder.h"
#include "models/registry.h"
#include "peft/peft_export.h"
#include "train/model_setup.h"
#include "train/training_args.h"

namespace snug::cli {

namespace {

struct PeftExportFlags {
  bool merge = false;
  bool adapter = false;
  std::string output;
  std::string checkpoint;
  FolderFlags folder;
};

int run_peft_export(const TrainingArguments& args, const PeftExportFlags& f) {
  SNUG_CHECK(f.merge != f.adapter, "snug export: give exactly one of --merge and --adapter");
  SNUG_CHECK(!f.output.empty(), "snug export: -o must not be empty");
  args.validate();
  SNUG_CHECK(args.lora_r > 0 || f.merge,
             "snug export: the run has no LoRA adapters; give the run's --lora-r (and "
             "--target-modules, --lora-alpha) to export them");
  set_num_threads(args.threads);
  const ModelConfig cfg = args.model_config();
  const HfFolderOptions fo =
      f.merge ? folder_options(f.folder, DType::f32, f.output) : HfFolderOptions{};
  SNUG_CHECK(f.merge || (f.folder.dtype.empty() && f.folder.max_shard_size.empty()),
             "snug export: --dtype and --max-shard-size apply to --merge -o DIR");
  Device dev(cpu_backend());
  // The model as `snug train` builds it from these flags: base (quantized or not) from the seed,
  // --init-from or the --model folder, then the adapters (A from the seed, B zero) until the
  // checkpoint's arrive.
  const auto owned = create_model(cfg, dev, args.param_dtype(), args.weight_quant());
  Model& model = *owned;
  TrainingArguments start = args;
  start.resume_from.clear();  // --checkpoint gives the values; resume_from means nothing here
  std::string source = load_initial_weights(model, start, cfg);
  prepare_model(model, args);
  if (args.lora_r > 0)
    source = "freshly initialized adapters (seed " + std::to_string(args.seed) + ")" +
             (initial_weights_path(args, cfg).empty() ? "" : " on " + source);
  if (!f.checkpoint.empty()) source = load_checkpoint_values(model, f.checkpoint, args);

  const size_t n = model.lora_adapters().size();
  if (f.adapter) {
    save_peft_adapter(model, f.output);
    std::printf(
        "snug: wrote the PEFT adapter of %s (%zu LoRA modules, r=%lld, %lld parameters) "
        "from %s to %s\n",
        cfg.shape.name.c_str(), n, static_cast<long long>(args.lora_r),
        static_cast<long long>(count_params(model.parameters(), true)), source.c_str(),
        f.output.c_str());
  } else if (is_folder_output(f.output)) {
    // A model folder from_pretrained loads. Its dtype defaults to the base's storage: bf16
    // under --bf16-full, else f32 (a quantized base is written dequantized, as merged weights).
    HfFolderOptions o = fo;
    if (f.folder.dtype.empty()) o.dtype = args.param_dtype();
    o.metadata = {{"snug_version", SNUG_VERSION}};
    const HfFolderWritten w = save_hf_folder(f.output, hf_config_json(cfg, o.dtype),
                                             merged_tensors(model), cfg.folder, o);
    std::printf(
        "snug: wrote the merged model %s (%zu LoRA modules merged) from %s as a Hugging Face "
        "model folder to %s (%s, %zu weight file%s, %lld bytes of tensors%s)\n",
        cfg.shape.name.c_str(), n, source.c_str(), f.output.c_str(), dtype_name(o.dtype),
        w.weight_files.size(), w.weight_files.size() == 1 ? "" : "s",
        static_cast<long long>(w.total_bytes),
        w.side_files.empty() ? "" : ", tokenizer files copied");
  } else {
    save_merged_weights(model, f.output, {{"snug_version", SNUG_VERSION}});
    std::printf("snug: wrote the merged weights of %s (%zu LoRA modules merged) from %s to %s\n",
                cfg.shape.name.c_str(), n, source.c_str(), f.output.c_str());
  }
  return 0;
}

}  // namespace

Command add_peft_export_command(CLI::App& app) {
  const auto c = add_training_subcommand(
      app, "export",
      "Export a LoRA run: the PEFT adapter (--adapter) or the merged full weights (--merge); "
      "give it the run's training flags");
  CLI::App* sub = c.sub;
  auto flags = std::make_shared<PeftExportFlags>();
  // Exactly one of --merge/--adapter, and -o: command-line errors (exit 2), caught by CLI11.
  CLI::Option_group* what =
      sub->add_option_group("what to export", "Exactly one of --merge and --adapter is required");
  what->add_flag("--merge", flags->merge,
                 "Write the merged full weights (Hugging Face names, no LoRA keys): a model "
                 "folder for -o DIR, one file for -o FILE.safetensors; without LoRA, the "
                 "model's own weights (a full fine-tune's checkpoint)");
  what->add_flag("--adapter", flags->adapter,
                 "Write adapter_config.json + adapter_model.safetensors as PEFT's save_pretrained");
  what->require_option(1);
  sub->add_option("-o,--output", flags->output,
                  "--merge: a Hugging Face model folder DIR (config.json, safetensors shards, "
                  "the --model folder's tokenizer files) or FILE.safetensors; --adapter: a "
                  "folder")
      ->required();
  add_folder_flags(sub, flags->folder);
  sub->add_option("--checkpoint", flags->checkpoint,
                  "Read the values from this checkpoint folder, or the latest complete checkpoint "
                  "of this output dir (default: the freshly initialized adapters)");
  return {sub, [t = c.flags, flags] { return run_peft_export(t->args, *flags); }};
}

}  // namespace snug::cli

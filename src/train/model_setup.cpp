#include "train/model_setup.h"

#include <cstdio>

#include "core/error.h"
#include "kernels/backends.h"
#include "kernels/gemm_path.h"
#include "kernels/lm_head.h"
#include "models/hf_folder.h"
#include "models/registry.h"
#include "nn/run_options.h"
#include "train/freeze.h"

namespace snug {

std::string initial_weights_path(const TrainingArguments& args, const ModelConfig& cfg) {
  if (!args.init_from.empty()) return args.init_from;
  return !cfg.folder.empty() && hf_folder_has_weights(cfg.folder) ? cfg.folder : "";
}

std::string load_initial_weights(Model& model, const TrainingArguments& args,
                                 const ModelConfig& cfg) {
  const std::string path = initial_weights_path(args, cfg);
  if (path.empty() || !args.resume_from.empty()) {
    if (!model.device().is_meta()) model.init_weights(args.seed);  // a dry run has no values
    return "seed " + std::to_string(args.seed);
  }
  // Every parameter gets the file's value (the load is strict), so init_weights is skipped;
  // except a task's head the checkpoint lacks (BERT's classifier on bert-base-uncased), which
  // the load initializes from the seed and reports, as transformers warns (on stderr, so that
  // --json outputs stay clean; a dry run has no values to speak of).
  const HfLoadReport report = load_model_weights(model, path, args.seed);
  const std::string what = report.describe();
  if (!what.empty() && !model.device().is_meta())
    std::fprintf(stderr, "snug: %s: %s\n", path.c_str(), what.c_str());
  return "the weights of " + path;
}

namespace {

// --bf16-full computes as --bf16 (and needs a model built with bf16 parameters); a 16-bit
// --torch-dtype computes in its dtype.
void set_compute(Model& model, const TrainingArguments& args) {
  model.set_compute_dtype(args.compute_dtype());
  const std::string& dev = args.kernels_device();
  model.set_gemm_path(kernels::resolve_gemm_path(args.gemm_path, dev));
  model.set_lm_head_budget(cuda_index(dev) ? kernels::kLmHeadGpuScratchBudgetFloats
                                           : kernels::kLmHeadScratchBudgetFloats);
}

}  // namespace

void configure_model(Model& model, const TrainingArguments& args) {
  model.set_attention(parse_attention_impl(args.attention));
  model.set_logits_mode(parse_logits_mode(args.logits));
  set_compute(model, args);
  SNUG_CHECK(model.param_dtype() == args.param_dtype(), "Trainer: the model's parameters are ",
             dtype_name(model.param_dtype()), " but the run needs ", dtype_name(args.param_dtype()),
             args.sixteen_bit_training()
                 ? " (--bf16-full, --precision-layout deepspeed: build the model with DType::bf16)"
                 : "");
  if (args.gradient_checkpointing)
    model.set_checkpointing(
        parse_checkpoint_policy(args.checkpoint_policy, model.summary().n_layer));
}

void prepare_model(Model& model, const TrainingArguments& args) {
  bool quantized = false;
  for (const Parameter* p : model.parameters()) quantized = quantized || p->quantized();
  SNUG_CHECK(!quantized || args.lora_r > 0,
             "a quantized base (--load-in-8bit/--load-in-4bit) cannot be trained directly; add "
             "LoRA adapters (--lora-r, or --qlora), as PEFT requires");
  model.set_dequant_bf16(quantized && args.bnb_4bit_compute_dtype == "bf16");
  // On a 16-bit base (--bf16-full, --torch-dtype) the adapters are fp32, as PEFT keeps them.
  if (args.lora_r > 0) model.add_lora(args.lora_config(), args.seed);
  apply_freeze(model.parameters(), args.freeze);
  // What trains in 16 bits: bf16 with --bf16-full's optimizer steps (stochastic rounding), fp16
  // never (as the Trainer refuses to unscale fp16 gradients).
  for (const Parameter* p : model.parameters()) {
    if (!p->requires_grad || p->quantized() || p->dtype() == DType::f32) continue;
    SNUG_CHECK(p->dtype() == DType::bf16 && args.sixteen_bit_training(), "--torch-dtype ",
               args.torch_dtype, " stores '", p->name, "' in ", dtype_name(p->dtype()),
               " and it would train: ",
               p->dtype() == DType::bf16
                   ? "add --bf16-full (bf16 weights, gradients and optimizer state), or train LoRA "
                     "adapters on the frozen bf16 base (--lora-r)"
                   : "fp16 parameters do not train; train LoRA adapters on the frozen fp16 base "
                     "(--lora-r), or store it in float32 with --fp16");
  }
  model.set_neftune_noise_alpha(args.neftune_noise_alpha);
}

void prepare_generation(Model& model, const TrainingArguments& args) {
  if (args.lora_r > 0) {
    if (model.lora_adapters().empty()) prepare_model(model, args);  // else: a PEFT adapter's
  } else {
    bool quantized = false;
    for (const Parameter* p : model.parameters()) quantized = quantized || p->quantized();
    model.set_dequant_bf16(quantized && args.bnb_4bit_compute_dtype == "bf16");
  }
  set_compute(model, args);  // as configure_model sets them for the Trainer
}

}  // namespace snug

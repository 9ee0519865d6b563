// What a run does to a freshly built (and loaded) model before the optimizer sees it, in one
// place for the Trainer, the planner's parameter counts and the estimator: the PEFT steps of a
// Hugging Face fine-tuning script (prepare the quantized base, get_peft_model, requires_grad_
// loops) and the model-side switches that are not about memory layout (NEFTune).
//   1. a quantized base (--load-in-8bit/--load-in-4bit) must get LoRA adapters: transformers
//      refuses to train a purely quantized model, and so does snug;
//   2. --bnb-4bit-compute-dtype bf16: dequantized weights are rounded to bf16 for the GEMMs;
//   3. --lora-r > 0: adapters on --target-modules, everything else frozen (nn/lora.h);
//   4. --freeze patterns (train/freeze.h), after LoRA so they may freeze adapters too;
//   5. --neftune-noise-alpha.
#pragma once

#include <string>

#include "models/model.h"
#include "models/model_config.h"
#include "train/training_args.h"

namespace snug {

// Where a run's starting weights come from, in this order of precedence:
//   1. --init-from PATH (a .safetensors file or a Hugging Face model folder), whatever --model is;
//   2. the weights of the --model folder (`--model DIR`: DIR/model.safetensors or its
//      model.safetensors.index.json shards);
//   3. none: the family's initialization from --seed (a preset, `--model path/config.json`, or
//      a folder without weights, e.g. config.json and a tokenizer for a from-scratch run:
//      initialized as transformers does for a config without weights).
// A resume (--resume-from) then replaces every value with its checkpoint's (train/checkpoint.h).
// Returns the path of 1 or 2, "" for 3. `cfg` is args.model_config().
std::string initial_weights_path(const TrainingArguments& args, const ModelConfig& cfg);

// Gives a freshly created model its starting values: init_weights(--seed), or the weights of
// initial_weights_path streamed into the parameters' storage (models/hf_weights.h: tensor by
// tensor, converted and quantized as they load, so a 16-, 8- or 4-bit model never exists in fp32
// on the host; a task head the checkpoint lacks is initialized from --seed and named on stderr,
// as transformers warns). Under --resume-from the weights are not read (the checkpoint's replace
// them) and the model is initialized from the seed as before. On meta only names and shapes are
// checked. Returns what the values are, for messages: "seed 42" or "the weights of PATH".
std::string load_initial_weights(Model& model, const TrainingArguments& args,
                                 const ModelConfig& cfg);

// The switches of a run that change how the model computes, not what it holds (the Trainer sets
// them before prepare_model): --attention, --logits, the compute dtype (--bf16, --fp16,
// --bf16-full, --torch-dtype), --gemm-path, and --gradient-checkpointing's --checkpoint-policy.
// Throws snug::Error when the model's parameters are not stored in the run's dtype (--bf16-full
// needs a model built with bf16 parameters), or for a bad policy.
void configure_model(Model& model, const TrainingArguments& args);

// Throws snug::Error naming the flag when the combination cannot train: a quantized base without
// adapters, or a 16-bit parameter that would train other than under --bf16-full (the base of a
// LoRA run on a 16-bit base is frozen; its adapters are fp32).
void prepare_model(Model& model, const TrainingArguments& args);

// What `snug generate` and `snug plan --inference` do to a freshly built and loaded model before
// generating (one place, so that the plan builds exactly the model the generation runs):
// prepare_model with --lora-r (a LoRA run's checkpoint; a quantized base may generate without
// adapters), else only a quantized base's --bnb-4bit-compute-dtype; then the compute dtype of
// --bf16/--fp16/--bf16-full/--torch-dtype and --gemm-path, as configure_model sets them. The model
// is built in TrainingArguments::generation_param_dtype(): 16-bit weights under --bf16/--fp16 (no
// fp32 master, as transformers generates), fp32 masters with 16-bit compute copies only under
// --torch-dtype float32 --bf16/--fp16.
void prepare_generation(Model& model, const TrainingArguments& args);

}  // namespace snug

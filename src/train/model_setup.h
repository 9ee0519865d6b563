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

#include "models/causal_lm.h"
#include "train/training_args.h"

namespace snug {

// Throws snug::Error naming the flag when the combination cannot train.
void prepare_model(CausalLM& model, const TrainingArguments& args);

}  // namespace snug

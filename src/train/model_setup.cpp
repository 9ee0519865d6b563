#include "train/model_setup.h"

#include "core/error.h"
#include "train/freeze.h"

namespace snug {

void prepare_model(CausalLM& model, const TrainingArguments& args) {
  bool quantized = false;
  for (const Parameter* p : model.parameters()) quantized = quantized || p->quantized();
  SNUG_CHECK(!quantized || args.lora_r > 0,
             "a quantized base (--load-in-8bit/--load-in-4bit) cannot be trained directly; add "
             "LoRA adapters (--lora-r, or --qlora), as PEFT requires");
  SNUG_CHECK(args.lora_r == 0 || model.param_dtype() == DType::f32,
             "--bf16-full with LoRA is not supported: the adapters train in fp32 on an fp32 or "
             "quantized base (use --bf16 for bf16 compute)");
  model.set_dequant_bf16(quantized && args.bnb_4bit_compute_dtype == "bf16");
  if (args.lora_r > 0) model.add_lora(args.lora_config(), args.seed);
  apply_freeze(model.parameters(), args.freeze);
  model.set_neftune_noise_alpha(args.neftune_noise_alpha);
}

}  // namespace snug

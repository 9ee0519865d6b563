// LoRA adapters into snug (`snug generate --adapter DIR`): the reader beside peft_export.h's
// writer. DIR is what `snug export --adapter` writes and what PEFT's save_pretrained writes for a
// LoRA on a causal LM:
//
//   adapter_config.json        r, lora_alpha, target_modules (a list; PEFT resolves
//                              "all-linear" to the module names before it saves), use_rslora,
//                              fan_in_fan_out; bias "none"; modules_to_save null
//   adapter_model.safetensors  "base_model.model.<module>.lora_A.weight" (r, in) and
//                              ".lora_B.weight" (out, r), F32, F16 or BF16, for every module the
//                              targets adapt, and nothing else
//
// The adapter's r, lora_alpha, target_modules and use_rslora take the place of --lora-r,
// --lora-alpha, --target-modules and --use-rslora; one of those flags given on the command line
// with another value is refused by name (the same value is accepted). What would make PEFT
// compute something snug does not (a bias, modules_to_save, DoRA, per-module ranks or alphas,
// a regex target, layers_to_transform...) is refused by its key, never ignored. fan_in_fan_out
// is read but, as in PEFT (which warns and corrects it), the module's own layout decides it: the
// tensors are nn.Linear-shaped either way. lora_dropout is training only.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "models/model.h"
#include "train/training_args.h"

namespace snug {

inline constexpr const char* kPeftConfigFile = "adapter_config.json";
inline constexpr const char* kPeftWeightsFile = "adapter_model.safetensors";
// The prefix of every tensor name in kPeftWeightsFile (PEFT's PeftModel wrapping the model).
inline constexpr const char* kPeftPrefix = "base_model.model.";

struct PeftAdapterConfig {
  std::string dir;          // the adapter folder
  std::string config_path;  // dir/adapter_config.json, for messages
  int64_t r = 0;
  double alpha = 0.0;
  bool use_rslora = false;
  std::vector<std::string> target_modules;
};

// Reads and checks dir/adapter_config.json (and that dir/adapter_model.safetensors exists).
// Every refusal names the folder, the file and the key.
PeftAdapterConfig read_peft_adapter_config(const std::string& dir);

// Sets args' LoRA (lora_r, lora_alpha, target_modules, use_rslora) to the adapter's.
// `given(flag)` says whether the command line gave that flag (e.g. "--lora-r"); a given flag
// whose value differs from the adapter's is an error naming the flag and the adapter's value.
void adopt_peft_adapter(TrainingArguments& args, const PeftAdapterConfig& a,
                        const std::function<bool(const std::string& flag)>& given);

// prepare_model (train/model_setup.h) with args as adopt_peft_adapter left them, then the
// adapter's tensors into the model's LoRA parameters: every tensor must name an adapter of the
// model with its shape, and every adapter must be in the file. A target that adapts nothing is
// refused naming adapter_config.json. cpu or meta (shapes only). Returns what the values are,
// for messages: "the adapter DIR (N LoRA modules, r=R)".
std::string load_peft_adapter(Model& model, const TrainingArguments& args,
                              const PeftAdapterConfig& a);

}  // namespace snug

// LoRA adapters out of snug, in the two forms the Hugging Face stack reads (`snug export`):
//
//   adapter  DIR/adapter_model.safetensors + DIR/adapter_config.json, as PEFT's save_pretrained
//            writes them for a LoRA on the Hugging Face model, so that
//            PeftModel.from_pretrained(base, DIR) rebuilds the adapted model. Keys
//            "base_model.model.<module>.lora_A.weight" (r, in) and ".lora_B.weight" (out, r), F32,
//            in module order, then the task's modules_to_save whole (BERT's sequence
//            classification: "base_model.model.classifier.weight"/".bias", trainable beside the
//            adapters as under PEFT's SEQ_CLS; models/model_config.h), metadata
//            {"format": "pt"}: PEFT keeps nn.Linear layouts for the adapters even on GPT-2's
//            Conv1D, and says so with fan_in_fan_out = true in the config.
//   merged   a Hugging Face model folder (models/hf_folder.h: config.json, shards, tokenizer
//            files), or one safetensors file in the model's Hugging Face names and layouts (what
//            save_model_weights writes and `--init-from` reads) with each adapted weight
//            replaced by W + scaling A^T B^T (Model::merged_weight): what PEFT's
//            merge_and_unload() followed by save_pretrained gives, without any LoRA key.
//            A quantized base (--load-in-8bit/--load-in-4bit) is written dequantized, in fp32.
//
// The values come from a training checkpoint (train/checkpoint.h): its model.safetensors holds
// every parameter the run stored, by name, and its quantized_base.safetensors the quantized base
// (train/quantized_base_file.h), so the export merges onto the run's own base whatever
// --init-from or --seed this export is given.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/hf_folder.h"
#include "models/model.h"
#include "train/training_args.h"

namespace snug {

// The PEFT release whose adapter_config.json fields and defaults peft_adapter_config() writes.
inline constexpr const char* kPeftFormatVersion = "0.21.2";

// Copies every tensor of safetensors file `path` into the model parameter of the same name
// (F32/F16/BF16 converted to the parameter's dtype). Every tensor must name a parameter that is
// not quantized, with its exact shape, and every LoRA adapter must be in the file; parameters
// not in the file keep their values. Errors name the file and the tensor. Returns how many
// parameters were loaded.
int64_t load_values_by_name(Model& model, const std::string& path);

// `dir` is a checkpoint folder or an output folder (resolve_checkpoint). Verifies its
// model.safetensors against trainer_state.json (size and checksum), checks that the run was
// configured as `args` where that changes the exported values (model shape, LoRA rank, alpha,
// rsLoRA, target modules, base quantization), then load_values_by_name. Returns the folder used.
std::string load_checkpoint_values(Model& model, const std::string& dir,
                                   const TrainingArguments& args);

// adapter_config.json of the model's adapters: every field PEFT 0.21's LoraConfig writes, PEFT's
// defaults for the ones snug does not have. "all-linear" is written as the adapted module names,
// as PEFT does after it resolves the shorthand.
nlohmann::json peft_adapter_config(const Model& model);

// Writes dir/adapter_model.safetensors and dir/adapter_config.json (creating dir). cpu only.
void save_peft_adapter(const Model& model, const std::string& dir);

// The merged model's tensors (see above) for a streamed writer (models/hf_folder.h): every
// parameter but the adapters, in parameters() order, each adapted weight's values merged when
// the writer reaches it. Without adapters these are the model's own weights.
std::vector<HfTensor> merged_tensors(const Model& model);

// Writes the merged model to `path` (see above), with the model's weights_metadata() plus
// `extra`, as F32, one tensor at a time (hf_folder's save_hf_folder writes it as a folder).
void save_merged_weights(const Model& model, const std::string& path,
                         const std::map<std::string, std::string>& extra = {});

}  // namespace snug

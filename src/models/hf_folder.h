// A Hugging Face model folder, as `save_pretrained` writes it and `from_pretrained` reads it:
//
//   config.json                    the model's config (hf_config_json), with "architectures"
//                                  and "dtype"
//   model.safetensors              every tensor, when they fit in one shard; else
//   model-00001-of-0000N.safetensors ... and model.safetensors.index.json
//                                  ({"metadata": {"total_parameters", "total_size"},
//                                    "weight_map": {name: shard}}), split as huggingface_hub's
//                                  split_torch_state_dict_into_shards does (plan_shards)
//   tokenizer.json, tokenizer_config.json, special_tokens_map.json, generation_config.json, ...
//                                  copied from the folder the model came from, when it had them
//
// save_hf_folder is the one writer behind `snug export --merge -o DIR`, `snug export-init -o
// DIR` and the config/tokenizer files of every full fine-tune's checkpoint-N (train/
// checkpoint.h). It streams: each tensor's fp32 values are produced when its shard reaches it
// and converted to the folder's dtype, so the host holds one tensor beside the model, never a
// second copy of the model (a quantized or bf16 model is written without an fp32 model).
// Reading a folder is models/registry.h (resolve_model: config.json; load_model_weights:
// models/hf_weights.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "models/model.h"
#include "models/model_config.h"

namespace snug {

// transformers' default max_shard_size, "5GB" (decimal, as transformers reads it).
inline constexpr int64_t kDefaultMaxShardBytes = 5'000'000'000;
inline constexpr const char* kHfConfigFile = "config.json";
inline constexpr const char* kHfSingleWeightsFile = "model.safetensors";
inline constexpr const char* kHfWeightsIndexFile = "model.safetensors.index.json";

// A shard size as transformers' max_shard_size takes it: an integer number of bytes, or a number
// with a unit, decimal (KB, MB, GB, TB: powers of 1000) or binary (KiB, MiB, GiB, TiB: powers of
// 1024), case-insensitive: "5GB", "500MB", "2GiB". At least 1 byte. Throws naming `flag`.
int64_t parse_shard_size(const std::string& text, const std::string& flag);

// The files of a model folder that are neither weights nor config.json and that a fine-tuned
// model needs beside its weights (tokenizer, generation defaults), in the order they are copied.
const std::vector<std::string>& hf_side_file_names();
// Those of `folder` that exist (file names, not paths); empty for "" or a folder without any.
std::vector<std::string> hf_side_files(const std::string& folder);
// Copies hf_side_files(from) into folder `to` (each atomically, io/output_file.h); returns the
// names copied.
std::vector<std::string> copy_hf_side_files(const std::string& from, const std::string& to);

// config.json for `cfg` with tensors stored as `dtype`, as transformers writes it: the keys of
// the config.json the model was read from (cfg.config_path: keys snug does not model, such as
// bos_token_id, are kept), overlaid with the resolved cfg.hf (which wins; its nulls only
// where the source has the key), "architectures" (the resolved config's when it has one, else the
// family's Hugging Face class when it names one) and "dtype" ("float32", "bfloat16", "float16").
nlohmann::json hf_config_json(const ModelConfig& cfg, DType dtype);

// One tensor of a folder: its Hugging Face name, shape, and how to produce its fp32 values into
// a host buffer of numel floats.
struct HfTensor {
  std::string name;
  Shape shape;
  std::function<void(float*)> values;
};
// Every parameter of `model` except LoRA adapters, in parameters() order, read through
// Model::read_values (quantized weights dequantized, bf16 widened). cpu models only.
std::vector<HfTensor> hf_model_tensors(const Model& model);

// The shards of tensors of these byte sizes, in order, at most `max_bytes` each, as
// huggingface_hub's split_state_dict_into_shards_factory: tensors fill the current shard in
// order and a tensor that would take it past max_bytes starts the next one; a tensor larger than
// max_bytes gets a shard of its own, placed before the shard being filled. Indices into `bytes`.
std::vector<std::vector<size_t>> plan_shards(const std::vector<int64_t>& bytes, int64_t max_bytes);

struct HfFolderOptions {
  DType dtype = DType::f32;  // every tensor's dtype in the folder: f32, bf16 or f16
  int64_t max_shard_bytes = kDefaultMaxShardBytes;
  // safetensors metadata of every shard, besides {"format": "pt"} (which transformers needs).
  std::map<std::string, std::string> metadata;
};

struct HfFolderWritten {
  std::vector<std::string> weight_files;  // file names, in shard order
  std::vector<std::string> side_files;    // tokenizer and generation files copied
  int64_t total_bytes = 0;                // of every tensor, as the index's total_size
};

// Writes folder `dir` (created if needed): config.json, the tensors (sharded beyond
// o.max_shard_bytes), and the side files of `source_folder` ("" for none). Every file is written
// atomically; weight files of an earlier save that this one does not write (model.safetensors
// or model-*-of-*.safetensors, the index) are removed, as save_pretrained does, so the folder
// holds one model. Non-finite values are written as they are.
HfFolderWritten save_hf_folder(const std::string& dir, const nlohmann::json& config,
                               const std::vector<HfTensor>& tensors,
                               const std::string& source_folder, const HfFolderOptions& o);

// True when folder `dir` holds weights: model.safetensors or model.safetensors.index.json.
bool hf_folder_has_weights(const std::string& dir);

// True when `path` names a folder to write (not a ".safetensors" file): the export commands'
// -o takes either.
bool is_folder_output(const std::string& path);

}  // namespace snug

// The registry of model families, keyed by Hugging Face `model_type`: a config.json (or a preset
// name) picks the family, and the family builds its Model. Adding a family is one entry in
// registry.cpp's list plus the family's own folder (docs/design.md, "Adding a model family"),
// or one register_architecture call.
// Nothing outside src/models/ names a family.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "models/hf_weights.h"
#include "models/model.h"
#include "models/model_config.h"
#include "quant/weight_quant.h"

namespace snug {

// Forward FLOPs per token of a training sequence of T tokens, split as the planner needs them.
struct FlopsPerToken {
  double layer_gemm = 0;  // the blocks' weight GEMMs (recomputed by gradient checkpointing)
  double attention = 0;   // scores and weighted values, causal (about (T+1)/2 keys per token)
  double head = 0;        // the LM head
  double forward() const { return layer_gemm + attention + head; }
};

// The config.json key each shape flag (--n-layer, --n-embd, --n-head, --vocab-size,
// --n-positions) sets; transformers' common names unless a family says otherwise (GPT-2).
struct ShapeKeys {
  const char* n_layer = "num_hidden_layers";
  const char* n_embd = "hidden_size";
  const char* n_head = "num_attention_heads";
  const char* vocab_size = "vocab_size";
  const char* n_positions = "max_position_embeddings";
};

// A family's entry: data, written with designated initializers (models/family.h has the parts
// entries share). Only model_type, parse, create and the two planner formulas are required.
struct Architecture {
  const char* model_type = "";  // Hugging Face model_type, "gpt2"
  // Preset names (with an alias each; "" for none), in the order --help lists them.
  std::vector<std::pair<std::string, std::string>> presets = {};
  // The resolved config.json of a preset (one of `presets`, by name).
  nlohmann::json (*preset_config)(const std::string& name) = nullptr;
  // A config.json object of this family, validated; every problem names `spec` and the key.
  // `name` becomes shape.name.
  ModelConfig (*parse)(const nlohmann::json& config, const std::string& spec,
                       const std::string& name) = nullptr;
  ShapeKeys keys = {};
  // A model on `dev` (parameters allocated, uninitialized; see Model::init_weights).
  std::unique_ptr<Model> (*create)(const ModelConfig& cfg, Device& dev, DType param_dtype,
                                   const std::optional<WeightQuantConfig>& quant) = nullptr;
  // What a Hugging Face checkpoint of this family may add to `model`'s parameters
  // (models/hf_weights.h); nullptr: nothing. Weights load strictly with these rules and save
  // with the model's weights_metadata().
  HfWeightRules (*weight_rules)(const Model& model) = nullptr;
  FlopsPerToken (*flops_per_token)(const ModelConfig& cfg, int64_t T) = nullptr;
  // Bytes one block keeps for backward at (s, b), e bytes per stored activation element (4 fp32,
  // 2 mixed precision), with or without the (b, heads, s, s) attention scores (Korthikanti et
  // al. 2022's per-layer count, for the closed-form estimate).
  int64_t (*layer_activation_bytes)(const ModelConfig& cfg, int64_t s, int64_t b, int64_t e,
                                    bool keep_scores) = nullptr;
  // The heads the family builds (ModelConfig::task); create_model refuses any other by name.
  std::vector<ModelTask> tasks = {ModelTask::causal_lm};
  // The same model with another head (--task, --num-labels > 0); nullptr for a family with one
  // task. The resolved config.json says so as transformers would (BERT: architectures, id2label).
  ModelConfig (*set_task)(const ModelConfig& cfg, ModelTask task, int64_t num_labels) = nullptr;
  // The transformers class of the causal LM ("GPT2LMHeadModel"): the "architectures" entry of a
  // config.json snug writes (models/hf_folder.h) unless the resolved config.json has its own.
  // nullptr: none written (AutoModelForCausalLM then goes by model_type).
  const char* hf_class = nullptr;
  // PEFT's default LoRA target_modules for the model type (--target-modules when not given).
  const char* default_lora_targets = "";
};

// `cfg` for --task `task` (and --num-labels when > 0); throws naming the flag when the family has
// no such head.
ModelConfig with_task(const ModelConfig& cfg, ModelTask task, int64_t num_labels);

// Every registered family, in registry order: the built-in ones (registry.cpp's list), then
// those added by register_architecture.
const std::vector<const Architecture*>& architectures();
// Adds a family (a new model_type; `a` must outlive its use): one line registers it, e.g. a
// test's own family. Throws when its model_type is taken or an entry it needs is missing.
void register_architecture(const Architecture& a);
// Removes family `a` (one a test registered) from the registry; no-op when it is not there.
void unregister_architecture(const Architecture& a);
// register_architecture for a scope (a test's own family), removed again when it ends.
class ScopedArchitecture {
 public:
  explicit ScopedArchitecture(const Architecture& a) : a_(&a) { register_architecture(a); }
  ~ScopedArchitecture() { unregister_architecture(*a_); }
  ScopedArchitecture(const ScopedArchitecture&) = delete;
  ScopedArchitecture& operator=(const ScopedArchitecture&) = delete;

 private:
  const Architecture* a_;
};
// The family of `model_type`; throws naming `where` and the supported types.
const Architecture& architecture(const std::string& model_type, const std::string& where = "");

// Every preset name of every family.
std::vector<std::string> model_preset_names();
// A preset name or alias, a path to a Hugging Face config.json (its model_type picks the family;
// a config without one is read as gpt2, as older GPT-2 configs are), or a Hugging Face model
// folder (its config.json; the result's `folder` names it, so that its weights and tokenizer
// files can follow: models/hf_weights.h, models/hf_folder.h), with the shape flags `o` and the
// "KEY=VALUE" `config_overrides` applied (models/config_override.h). A folder without
// config.json, an unreadable config or an unknown model_type is an error naming the path.
ModelConfig resolve_model(const std::string& name_or_path, const ModelShapeOverrides& o = {},
                          const std::vector<std::string>& config_overrides = {});
// The text of a config.json named `spec`, validated by its family.
ModelConfig parse_model_config(std::string_view text, const std::string& spec);

// The family's model for `cfg` (see Architecture::create).
std::unique_ptr<Model> create_model(const ModelConfig& cfg, Device& dev,
                                    DType param_dtype = DType::f32,
                                    const std::optional<WeightQuantConfig>& quant = std::nullopt);
// `init_seed` initializes a head the checkpoint lacks (HfWeightRules::fresh_prefixes).
HfLoadReport load_model_weights(Model& model, const std::string& path, uint64_t init_seed = 0);
void save_model_weights(const Model& model, const std::string& path,
                        const std::map<std::string, std::string>& extra = {});

}  // namespace snug

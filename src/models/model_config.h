// A model's configuration, whatever the family (models/registry.h resolves one): the shape that
// every layer above models/ reads, the exact parameter count, and the resolved Hugging Face
// config.json from which the family builds the model. The json is the source of truth, as in
// transformers: shape overrides edit it and the family re-validates it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"

namespace snug {

// What a model is trained for: the head on top of the layers and how forward() reads its
// targets (models/model.h, "Tasks"). Not every family has every task (Architecture::tasks).
enum class ModelTask : int { causal_lm, masked_lm, sequence_classification };
// "causal-lm", "masked-lm", "sequence-classification" (the --task values).
const char* task_name(ModelTask t);
// The --task value `name`; throws naming `where` and the values.
ModelTask parse_task(const std::string& name, const std::string& where);
// PEFT's view of a task, so that an adapter snug writes is the one PEFT would have written:
// LoraConfig.task_type ("CAUSAL_LM", "SEQ_CLS"; nullptr for masked LM, which PEFT has no task
// type for: a plain PeftModel), and the modules PEFT keeps trainable beside the adapters and
// saves in the adapter file (PeftModelForSequenceClassification: "classifier" and "score", the
// list its adapter_config.json carries as modules_to_save; empty for the others).
const char* peft_task_type(ModelTask t);
const std::vector<std::string>& peft_modules_to_save(ModelTask t);

struct ModelConfig {
  ModelSummary shape;      // name, model_type and the dimensions reports show
  int64_t num_params = 0;  // parameters of the model as built, without adapters (tied: once)
  nlohmann::json hf;       // config.json keys as resolved (a preset's are what HF would write)
  ModelTask task = ModelTask::causal_lm;
  int64_t num_labels = 0;      // sequence classification: classes (0: the config.json's)
  int64_t mask_token_id = -1;  // masked LM: the id the collator writes for a masked token
  // Where it came from (models/registry.h, resolve_model): the Hugging Face model folder of
  // `--model DIR` (its weights are the run's starting point, its tokenizer files go into exports
  // and checkpoints), and the config.json file read (DIR/config.json, or `--model
  // path/config.json`). Both "" for a preset.
  std::string folder;
  std::string config_path;
};

// A family's ModelConfig: `shape` (with its model_type), the exact parameter count and the
// resolved config.json (task causal_lm).
ModelConfig shape_config(ModelSummary shape, int64_t num_params, nlohmann::json hf);
// The same for a family config with transformers' common field names (num_hidden_layers,
// hidden_size, num_attention_heads, vocab_size, max_position_embeddings), its name and
// num_params(), with the resolved config.json `hf`.
template <class C>
ModelConfig common_shape_config(const C& c, std::string model_type, nlohmann::json hf) {
  return shape_config({.name = c.name,
                       .model_type = std::move(model_type),
                       .n_layer = c.num_hidden_layers,
                       .n_embd = c.hidden_size,
                       .n_head = c.num_attention_heads,
                       .vocab_size = c.vocab_size,
                       .n_positions = c.max_position_embeddings},
                      c.num_params(), std::move(hf));
}

// Shape overrides on top of a preset or config.json (--n-layer, --n-embd, --n-head,
// --vocab-size, --n-positions), so that any shape of a family can be planned from flags alone,
// e.g. gpt2-124m with n_layer 32, n_embd 4096, n_head 32, n_positions 2048 is a 6.7B "7B" shape.
// Each family maps them onto its own config.json keys (models/registry.h).
struct ModelShapeOverrides {
  std::optional<int64_t> vocab_size, n_positions, n_embd, n_layer, n_head;
  bool any() const { return vocab_size || n_positions || n_embd || n_layer || n_head; }
};

}  // namespace snug

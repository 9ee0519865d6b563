// GPT-2 shapes: the named presets, any Hugging Face GPT-2 config.json, and closed-form counts.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "models/model_config.h"

namespace snug {

struct GPT2Config {
  std::string name = {};
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;  // maximum context
  int64_t n_embd = 768;        // C
  int64_t n_layer = 12;        // L
  int64_t n_head = 12;         // NH
  float layer_norm_epsilon = 1e-5f;

  int64_t head_size() const { return n_embd / n_head; }
  // Parameters with the LM head tied to wte (as GPT-2): V*C + P*C + L*(12C^2 + 13C) + 2C.
  int64_t num_params() const;
  void validate() const;  // throws snug::Error for impossible shapes
};

// The GPT-2 family's entry of models/registry.h (gpt2_family.cpp) resolves presets and
// config.json files into a ModelConfig; these read one back as GPT-2's own shape.
//
// Presets: "gpt2-tiny", "gpt2-124m" (alias "gpt2"), "gpt2-350m" ("gpt2-medium"), "gpt2-774m"
// ("gpt2-large"), "gpt2-1.5b" ("gpt2-xl"). config.json keys: vocab_size, n_positions, n_embd,
// n_layer, n_head, layer_norm_epsilon.
//
// GPT-2's shape of a resolved gpt2 ModelConfig (throws for another model_type).
GPT2Config gpt2_config(const ModelConfig& cfg);
// resolve_model (models/registry.h) for a GPT-2 preset or config.json: gpt2_config of it.
GPT2Config resolve_gpt2(const std::string& name_or_path, const ModelShapeOverrides& o = {});
// A GPT-2 config.json object, validated, named `name`; problems name `spec` and the key.
GPT2Config parse_gpt2_config(const nlohmann::json& j, const std::string& spec,
                             const std::string& name);
// The presets: name and alias, and the config.json keys of one.
const std::vector<std::pair<std::string, std::string>>& gpt2_presets();
nlohmann::json gpt2_preset_config(const std::string& name);
// GPT2Config as config.json keys (model_type "gpt2").
nlohmann::json gpt2_config_json(const GPT2Config& c);
// The ModelConfig of a GPT-2 shape (the registry's entry parses into it).
ModelConfig gpt2_model_config(const GPT2Config& c);

}  // namespace snug

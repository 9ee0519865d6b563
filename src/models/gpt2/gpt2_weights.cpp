#include "models/gpt2/gpt2_weights.h"

#include <sstream>

#include "models/hf_weights.h"

namespace snug {

namespace {

constexpr const char* kPrefix = "transformer.";
constexpr const char* kLmHead = "lm_head.weight";

std::string float_str(float v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

}  // namespace

std::map<std::string, std::string> gpt2_weights_metadata(const GPT2Config& cfg) {
  return {{"format", "pt"},
          {"model", cfg.name},
          {"vocab_size", std::to_string(cfg.vocab_size)},
          {"n_positions", std::to_string(cfg.n_positions)},
          {"n_embd", std::to_string(cfg.n_embd)},
          {"n_layer", std::to_string(cfg.n_layer)},
          {"n_head", std::to_string(cfg.n_head)},
          {"layer_norm_epsilon", float_str(cfg.layer_norm_epsilon)}};
}

HfWeightRules gpt2_weight_rules(const GPT2Config& cfg) {
  HfWeightRules r;
  r.model_desc = cfg.name + " (GPT-2)";
  r.optional_prefix = kPrefix;
  // The causal-mask buffers older transformers versions saved with GPT-2 (not parameters).
  r.ignored_suffixes = {".attn.bias", ".attn.masked_bias"};
  r.tied_name = kLmHead;
  r.tied_to = "transformer.wte.weight";
  r.tie_note = "snug ties the LM head to the token embedding (GPT-2's layout)";
  return r;
}

void save_gpt2_weights(const GPT2& model, const std::string& path,
                       const std::map<std::string, std::string>& extra) {
  save_hf_weights(model, path, extra);
}

HfLoadReport load_gpt2_weights(GPT2& model, const std::string& path) {
  return load_hf_weights(model, path, gpt2_weight_rules(model.config()));
}

std::map<std::string, std::string> GPT2::weights_metadata() const {
  return gpt2_weights_metadata(cfg_);
}

}  // namespace snug

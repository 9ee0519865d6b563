#include "models/llama/llama_weights.h"

namespace snug {

HfWeightRules llama_weight_rules(const LlamaConfig& cfg) {
  HfWeightRules r;
  r.model_desc = cfg.name + " (" + cfg.model_type() + ")";
  r.ignored_suffixes = {".rotary_emb.inv_freq"};
  if (cfg.tie_word_embeddings) {
    r.tied_name = "lm_head.weight";
    r.tied_to = "model.embed_tokens.weight";
  }
  return r;
}

void save_llama_weights(const LlamaLM& model, const std::string& path,
                        const std::map<std::string, std::string>& extra) {
  save_hf_weights(model, path, extra);
}

HfLoadReport load_llama_weights(LlamaLM& model, const std::string& path) {
  return load_hf_weights(model, path, llama_weight_rules(model.config()));
}

}  // namespace snug

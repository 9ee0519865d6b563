#include "models/llama/llama_weights.h"

#include "models/named_weights.h"

namespace snug {

void save_llama_weights(const LlamaLM& model, const std::string& path,
                        const std::map<std::string, std::string>& extra) {
  save_named_weights(model, path, extra);
}

void load_llama_weights(LlamaLM& model, const std::string& path) {
  load_named_weights(model, path,
                     {.ignored = {".rotary_emb.inv_freq"}, .tied_head = "lm_head.weight"});
}

}  // namespace snug

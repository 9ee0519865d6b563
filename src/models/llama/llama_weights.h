// Llama/Mistral/Qwen2 weights under their Hugging Face names (models/hf_weights.h): a
// safetensors file or a model folder. lm_head.weight is absent when tied (accepted when equal to
// model.embed_tokens.weight); the rotary inv_freq buffers of older checkpoints are ignored.
#pragma once

#include <map>
#include <string>

#include "models/hf_weights.h"
#include "models/llama/llama.h"

namespace snug {

HfWeightRules llama_weight_rules(const LlamaConfig& cfg);
void save_llama_weights(const LlamaLM& model, const std::string& path,
                        const std::map<std::string, std::string>& extra = {});
HfLoadReport load_llama_weights(LlamaLM& model, const std::string& path);

}  // namespace snug

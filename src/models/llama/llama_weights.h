// Llama/Mistral/Qwen2 weights as their Hugging Face safetensors file: names as named_parameters(),
// lm_head.weight absent when tied (accepted when equal to the embedding), the rotary inv_freq
// buffers of older checkpoints ignored.
#pragma once

#include <map>
#include <string>

#include "models/llama/llama.h"

namespace snug {

void save_llama_weights(const LlamaLM& model, const std::string& path,
                        const std::map<std::string, std::string>& extra = {});
void load_llama_weights(LlamaLM& model, const std::string& path);

}  // namespace snug

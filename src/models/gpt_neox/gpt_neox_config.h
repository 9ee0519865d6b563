// GPT-NeoX (Hugging Face model_type `gpt_neox`; EleutherAI's Pythia and polyglot-ko): config.json
// keys and transformers' GPTNeoXConfig defaults, presets, the exact parameter count.
//   hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, vocab_size,
//   max_position_embeddings, layer_norm_eps (1e-5), initializer_range (0.02),
//   rotary_pct (0.25) and rotary_emb_base (10000) (or v5's rope_parameters with
//   partial_rotary_factor and rope_theta), use_parallel_residual (true), attention_bias (true),
//   hidden_act gelu (exact erf) or gelu_new / gelu_pytorch_tanh / gelu_fast (tanh),
//   tie_word_embeddings (false: the untied embed_out head).
// Refused by name: rope_scaling (not implemented for gpt_neox), nonzero attention_dropout or
// hidden_dropout (no dropout yet), other activations, any key snug does not know.
//
// Parameters, H hidden, I intermediate, L layers: V*H (embed_in) + L * (4H (two LayerNorms) +
// 3H*H [+ 3H] (query_key_value) + H*H [+ H] (dense) + 2*H*I + I + H (MLP)) + 2H (final norm)
// [+ V*H embed_out when untied].
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "models/model_config.h"

namespace snug {

struct GPTNeoXConfig {
  std::string name;
  int64_t vocab_size = 50432;
  int64_t hidden_size = 6144;
  int64_t intermediate_size = 24576;
  int64_t num_hidden_layers = 44;
  int64_t num_attention_heads = 64;
  int64_t max_position_embeddings = 2048;
  double rotary_pct = 0.25;
  double rotary_emb_base = 10000.0;
  float layer_norm_eps = 1e-5f;
  double initializer_range = 0.02;
  bool use_parallel_residual = true;
  bool attention_bias = true;
  bool gelu_exact = true;  // "gelu"; false: the tanh approximation
  bool tie_word_embeddings = false;
  nlohmann::json hf;  // the resolved config.json

  int64_t head_dim() const { return hidden_size / num_attention_heads; }
  int64_t rotary_dim() const {
    return static_cast<int64_t>(static_cast<double>(head_dim()) * rotary_pct);
  }
  int64_t num_params() const;
};

GPTNeoXConfig parse_gpt_neox_config(const nlohmann::json& j, const std::string& spec,
                                    const std::string& name);
GPTNeoXConfig gpt_neox_config(const ModelConfig& cfg);
ModelConfig gpt_neox_model_config(const GPTNeoXConfig& c);

const std::vector<std::pair<std::string, std::string>>& gpt_neox_presets();
nlohmann::json gpt_neox_preset_config(const std::string& name);

}  // namespace snug

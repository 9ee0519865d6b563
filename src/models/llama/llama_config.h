// The Llama-shaped decoders: Hugging Face model_type `llama`, `mistral` and `qwen2`, one code
// path with three registry entries (llama_family.cpp). They share the layer (RMSNorm, rotary
// with rotate_half, GQA, SwiGLU, pre-norm sequential residual) and differ in their config.json
// keys and defaults:
//   llama    attention_bias (q, k, v and o), mlp_bias, head_dim, rope_scaling linear / llama3
//   mistral  no biases; sliding_window (each query attends to the window's latest keys)
//   qwen2    q/k/v biases, no o bias; use_sliding_window must be false
// Every other key is read with transformers' class default, accepted as harmless, or refused by
// name (models/config_reader.h).
//
// Parameter count, with H hidden, I intermediate, L layers, Q = heads * head_dim, K = kv heads *
// head_dim: V*H (embed_tokens) + L * (H*Q + 2*H*K + Q*H [+ Q + 2K q/k/v biases] [+ H o bias]
// + 3*H*I [+ 2I + H mlp biases] + 2H) + H (norm) [+ V*H untied lm_head].
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/model_config.h"

namespace snug {

enum class LlamaVariant { llama, mistral, qwen2 };

// `rope_scaling` (v4 config.json) or `rope_parameters` (v5): how the rotary inverse frequencies
// are derived from rope_theta.
struct LlamaRope {
  enum class Type { none, linear, llama3 } type = Type::none;
  double theta = 10000.0;
  double partial_rotary_factor = 1.0;
  double factor = 1.0;  // linear, llama3
  double low_freq_factor = 1.0, high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;  // llama3
};

struct LlamaConfig {
  std::string name;
  LlamaVariant variant = LlamaVariant::llama;
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 32;
  int64_t head_dim = 128;
  int64_t max_position_embeddings = 2048;
  float rms_norm_eps = 1e-6f;
  double initializer_range = 0.02;
  LlamaRope rope;
  bool tie_word_embeddings = false;
  bool qkv_bias = false, o_bias = false, mlp_bias = false;
  std::optional<int64_t> sliding_window;  // mistral: keys a query attends to, itself included
  nlohmann::json hf;                      // the resolved config.json

  const char* model_type() const;
  int64_t rotary_dim() const;
  // The rotary_dim/2 inverse frequencies of a scaled rope, computed in float as transformers'
  // modeling_rope_utils does; empty for an unscaled rope (the kernel's 1/theta^(2j/R)).
  std::vector<float> rope_inv_freq() const;
  int64_t num_params() const;
};

// A config.json object of `variant`, validated (every problem names `spec` and the key).
LlamaConfig parse_llama_config(LlamaVariant variant, const nlohmann::json& j,
                               const std::string& spec, const std::string& name);
// The resolved config of a ModelConfig of one of the three families.
LlamaConfig llama_config(const ModelConfig& cfg);
ModelConfig llama_model_config(const LlamaConfig& c);

// Presets of a variant (name, alias) and their config.json.
const std::vector<std::pair<std::string, std::string>>& llama_presets(LlamaVariant v);
nlohmann::json llama_preset_config(const std::string& name);

}  // namespace snug

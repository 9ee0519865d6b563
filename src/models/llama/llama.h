// The Llama-shaped causal LMs (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM) as a
// DecoderLM (models/decoder_lm.h): token embeddings, L layers of
//   h = x + o_proj(attn(rope(q_proj(rms1(x))), rope(k_proj(..)), v_proj(..)))   GQA
//   out = h + down_proj(silu(gate_proj(rms2(h))) * up_proj(rms2(h)))
// a final RMSNorm and lm_head (or the embedding, tied). Mistral's sliding_window W limits each
// query to the W latest keys, itself included (nn/attention.h). Parameter names and order are
// Hugging Face's named_parameters(): model.embed_tokens.weight,
// model.layers.{i}.self_attn.{q,k,v,o}_proj
// (.weight, .bias where the config has them), .mlp.{gate,up,down}_proj, .input_layernorm,
// .post_attention_layernorm, model.norm.weight, lm_head.weight (absent when tied). Linear weights
// are nn.Linear's (out, in).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/device.h"
#include "models/decoder_lm.h"
#include "models/llama/llama_config.h"
#include "quant/weight_quant.h"

namespace snug {

DecoderLMSpec llama_spec(const LlamaConfig& cfg);

class LlamaLM final : public DecoderLM {
 public:
  LlamaLM(const LlamaConfig& cfg, Device& dev, DType param_dtype = DType::f32,
          const std::optional<WeightQuantConfig>& quant = std::nullopt);

  const LlamaConfig& config() const { return cfg_; }
  ModelSummary summary() const override;
  // "format": "pt", the model's name and model_type, and the resolved config.json.
  std::map<std::string, std::string> weights_metadata() const override;
  // transformers' _init_weights: normal(0, initializer_range) for every Linear and Embedding
  // weight (lm_head too when untied), zero biases, RMSNorm weights 1.
  void init_weights(uint64_t seed) override;

 private:
  LlamaConfig cfg_;
};

}  // namespace snug

// GPT-NeoX (GPTNeoXForCausalLM) as a DecoderLM (models/decoder_lm.h): embed_in, L layers of
//   parallel    out = x + dense(attn(qkv(ln1(x)))) + mlp(ln2(x))       (use_parallel_residual)
//   sequential  h = x + dense(attn(qkv(ln1(x))));  out = h + mlp(ln2(h))
// with biased LayerNorms, the fused per-head interleaved query_key_value projection (per head
// h: [q_h | k_h | v_h]), rotary on the first rotary_pct of each head, a GELU MLP
// (dense_h_to_4h, dense_4h_to_h), the final LayerNorm and the untied embed_out head. Parameter
// names and order are Hugging Face's named_parameters(): gpt_neox.embed_in.weight,
// gpt_neox.layers.{i}.input_layernorm, .post_attention_layernorm, .attention.query_key_value,
// .attention.dense, .mlp.dense_h_to_4h, .mlp.dense_4h_to_h, gpt_neox.final_layer_norm,
// embed_out.weight. Weights as nn.Linear's (out, in).
//
// Its weights are those names (models/hf_weights.h; the causal-mask and inv_freq buffers older
// transformers saved are ignored on load, embed_out.weight is absent when tied).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/device.h"
#include "models/decoder_lm.h"
#include "models/gpt_neox/gpt_neox_config.h"
#include "models/hf_weights.h"
#include "quant/weight_quant.h"

namespace snug {

DecoderLMSpec gpt_neox_spec(const GPTNeoXConfig& cfg);

class GPTNeoXLM final : public DecoderLM {
 public:
  GPTNeoXLM(const GPTNeoXConfig& cfg, Device& dev, DType param_dtype = DType::f32,
            const std::optional<WeightQuantConfig>& quant = std::nullopt);

  const GPTNeoXConfig& config() const { return cfg_; }
  ModelSummary summary() const override;
  std::map<std::string, std::string> weights_metadata() const override;
  // transformers' _init_weights: normal(0, initializer_range) for Linear and Embedding weights
  // (embed_out too), zero biases, LayerNorm weight 1 and bias 0.
  void init_weights(uint64_t seed) override;

 private:
  GPTNeoXConfig cfg_;
};

HfWeightRules gpt_neox_weight_rules(const GPTNeoXConfig& cfg);
void save_gpt_neox_weights(const GPTNeoXLM& model, const std::string& path,
                           const std::map<std::string, std::string>& extra = {});
HfLoadReport load_gpt_neox_weights(GPTNeoXLM& model, const std::string& path);

}  // namespace snug

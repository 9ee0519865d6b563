#include "models/llama/llama.h"

#include "models/family.h"
#include "models/llama/llama_config.h"

namespace snug {

DecoderLMSpec llama_spec(const ModelConfig& cfg) {
  const LlamaConfig c = llama_config(cfg);
  const nn::DecoderLayerConfig layer{.norm = nn::NormKind::rms,
                                     .norm_eps = c.rms_norm_eps,
                                     .parallel_residual = false,
                                     .attn = {.hidden = c.hidden_size,
                                              .num_heads = c.num_attention_heads,
                                              .num_kv_heads = c.num_key_value_heads,
                                              .head_dim = c.head_dim,
                                              .sliding_window = c.sliding_window.value_or(0),
                                              .qkv_bias = c.qkv_bias,
                                              .o_bias = c.o_bias,
                                              .rotary_dim = c.rotary_dim(),
                                              .rope_theta = static_cast<float>(c.rope.theta),
                                              .rope_inv_freq = c.rope_inv_freq(),
                                              .fused_qkv_name = ""},
                                     .mlp = {.hidden = c.hidden_size,
                                             .intermediate = c.intermediate_size,
                                             .act = nn::Activation::silu_gated,
                                             .bias = c.mlp_bias},
                                     .order = nn::LayerParamOrder::blocks_first};
  // model.embed_tokens, model.layers.{i}, model.norm, lm_head: the spec's defaults.
  return common_spec(c, layer);
}

}  // namespace snug

#include "models/gpt_neox/gpt_neox.h"

#include "models/family.h"
#include "models/gpt_neox/gpt_neox_config.h"

namespace snug {

DecoderLMSpec gpt_neox_spec(const ModelConfig& cfg) {
  const GPTNeoXConfig c = gpt_neox_config(cfg);
  const nn::DecoderLayerConfig layer{
      .norm = nn::NormKind::layer,
      .norm_eps = c.layer_norm_eps,
      .parallel_residual = c.use_parallel_residual,
      .attn = {.hidden = c.hidden_size,
               .num_heads = c.num_attention_heads,
               .qkv_bias = c.attention_bias,
               .o_bias = c.attention_bias,
               .rotary_dim = c.rotary_dim(),
               .rope_theta = static_cast<float>(c.rotary_emb_base),
               .o_name = "dense",
               .fused_qkv_name = "query_key_value",
               .fused_qkv_layout = nn::FusedQKVLayout::per_head_interleaved},
      .mlp = {.hidden = c.hidden_size,
              .intermediate = c.intermediate_size,
              .act = c.gelu_exact ? nn::Activation::gelu_erf : nn::Activation::gelu_tanh,
              .bias = true,
              .up_name = "dense_h_to_4h",
              .down_name = "dense_4h_to_h"},
      .order = nn::LayerParamOrder::norms_first,
      .attn_name = "attention"};
  DecoderLMSpec s = common_spec(c, layer);
  s.embed_name = "gpt_neox.embed_in.weight";
  s.layer_prefix = "gpt_neox.layers.";
  s.final_norm_name = "gpt_neox.final_layer_norm";
  s.head_name = "embed_out";
  return s;
}

}  // namespace snug

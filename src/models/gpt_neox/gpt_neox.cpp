#include "models/gpt_neox/gpt_neox.h"

#include "core/error.h"
#include "models/hf_weights.h"

namespace snug {

DecoderLMSpec gpt_neox_spec(const GPTNeoXConfig& c) {
  nn::DecoderLayerConfig layer;
  layer.norm = nn::NormKind::layer;
  layer.norm_eps = c.layer_norm_eps;
  layer.parallel_residual = c.use_parallel_residual;
  layer.order = nn::LayerParamOrder::norms_first;
  layer.attn_name = "attention";
  layer.attn.hidden = c.hidden_size;
  layer.attn.num_heads = c.num_attention_heads;
  layer.attn.qkv_bias = layer.attn.o_bias = c.attention_bias;
  layer.attn.rotary_dim = c.rotary_dim();
  layer.attn.rope_theta = static_cast<float>(c.rotary_emb_base);
  layer.attn.fused_qkv_name = "query_key_value";
  layer.attn.fused_qkv_layout = nn::FusedQKVLayout::per_head_interleaved;
  layer.attn.o_name = "dense";
  layer.mlp.hidden = c.hidden_size;
  layer.mlp.intermediate = c.intermediate_size;
  layer.mlp.act = c.gelu_exact ? nn::Activation::gelu_erf : nn::Activation::gelu_tanh;
  layer.mlp.bias = true;
  layer.mlp.up_name = "dense_h_to_4h";
  layer.mlp.down_name = "dense_4h_to_h";
  DecoderLMSpec s;
  s.name = c.name;
  s.vocab = c.vocab_size;
  s.hidden = c.hidden_size;
  s.layers = c.num_hidden_layers;
  s.max_positions = c.max_position_embeddings;
  s.embed_name = "gpt_neox.embed_in.weight";
  s.layer_prefix = "gpt_neox.layers.";
  s.layer = layer;
  s.final_norm_name = "gpt_neox.final_layer_norm";
  s.head_name = "embed_out";
  s.tie_word_embeddings = c.tie_word_embeddings;
  return s;
}

GPTNeoXLM::GPTNeoXLM(const GPTNeoXConfig& cfg, Device& dev, DType param_dtype,
                     const std::optional<WeightQuantConfig>& quant)
    : DecoderLM(gpt_neox_spec(cfg), dev, param_dtype, quant), cfg_(cfg) {
  SNUG_ASSERT(count_params(parameters()) == cfg_.num_params());
}

ModelSummary GPTNeoXLM::summary() const {
  return gpt_neox_model_config(cfg_).shape;
}

std::map<std::string, std::string> GPTNeoXLM::weights_metadata() const {
  return {{"format", "pt"},
          {"model", cfg_.name},
          {"model_type", "gpt_neox"},
          {"config", cfg_.hf.dump()}};
}

void GPTNeoXLM::init_weights(uint64_t seed) {
  init_normal_weights(seed, static_cast<float>(cfg_.initializer_range));
}

HfWeightRules gpt_neox_weight_rules(const GPTNeoXConfig& cfg) {
  HfWeightRules r;
  r.model_desc = cfg.name + " (gpt_neox)";
  // The causal-mask and rotary buffers older transformers versions saved.
  r.ignored_suffixes = {".attention.bias", ".attention.masked_bias", ".rotary_emb.inv_freq"};
  if (cfg.tie_word_embeddings) {
    r.tied_name = "embed_out.weight";
    r.tied_to = "gpt_neox.embed_in.weight";
  }
  return r;
}

void save_gpt_neox_weights(const GPTNeoXLM& model, const std::string& path,
                           const std::map<std::string, std::string>& extra) {
  save_hf_weights(model, path, extra);
}

HfLoadReport load_gpt_neox_weights(GPTNeoXLM& model, const std::string& path) {
  return load_hf_weights(model, path, gpt_neox_weight_rules(model.config()));
}

}  // namespace snug

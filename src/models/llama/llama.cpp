#include "models/llama/llama.h"

#include "core/error.h"

namespace snug {

DecoderLMSpec llama_spec(const LlamaConfig& c) {
  nn::DecoderLayerConfig layer;
  layer.norm = nn::NormKind::rms;
  layer.norm_eps = c.rms_norm_eps;
  layer.parallel_residual = false;
  layer.order = nn::LayerParamOrder::blocks_first;
  layer.attn.hidden = c.hidden_size;
  layer.attn.num_heads = c.num_attention_heads;
  layer.attn.num_kv_heads = c.num_key_value_heads;
  layer.attn.head_dim = c.head_dim;
  layer.attn.qkv_bias = c.qkv_bias;
  layer.attn.o_bias = c.o_bias;
  layer.attn.rotary_dim = c.rotary_dim();
  layer.attn.rope_theta = static_cast<float>(c.rope.theta);
  layer.attn.rope_inv_freq = c.rope_inv_freq();
  layer.attn.sliding_window = c.sliding_window.value_or(0);
  layer.mlp.hidden = c.hidden_size;
  layer.mlp.intermediate = c.intermediate_size;
  layer.mlp.act = nn::Activation::silu_gated;
  layer.mlp.bias = c.mlp_bias;
  DecoderLMSpec s;
  s.name = c.name;
  s.vocab = c.vocab_size;
  s.hidden = c.hidden_size;
  s.layers = c.num_hidden_layers;
  s.max_positions = c.max_position_embeddings;
  s.layer = layer;
  s.tie_word_embeddings = c.tie_word_embeddings;
  return s;  // model.embed_tokens, model.layers.{i}, model.norm, lm_head: the spec's defaults
}

LlamaLM::LlamaLM(const LlamaConfig& cfg, Device& dev, DType param_dtype,
                 const std::optional<WeightQuantConfig>& quant)
    : DecoderLM(llama_spec(cfg), dev, param_dtype, quant), cfg_(cfg) {
  SNUG_ASSERT(count_params(parameters()) == cfg_.num_params());
}

ModelSummary LlamaLM::summary() const {
  return llama_model_config(cfg_).shape;
}

std::map<std::string, std::string> LlamaLM::weights_metadata() const {
  return {{"format", "pt"},
          {"model", cfg_.name},
          {"model_type", cfg_.model_type()},
          {"config", cfg_.hf.dump()}};
}

void LlamaLM::init_weights(uint64_t seed) {
  init_normal_weights(seed, static_cast<float>(cfg_.initializer_range));
}

}  // namespace snug

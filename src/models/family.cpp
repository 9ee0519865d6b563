#include "models/family.h"

#include <utility>

namespace snug {

SpecDecoderLM::SpecDecoderLM(const ModelConfig& cfg, const DecoderLMSpec& spec, Device& dev,
                             DType param_dtype, const std::optional<WeightQuantConfig>& quant)
    : DecoderLM(spec, dev, param_dtype, quant), cfg_(cfg) {
  SNUG_ASSERT(count_params(parameters()) == cfg_.num_params, cfg_.shape.model_type,
              " parameter count");
}

std::map<std::string, std::string> SpecDecoderLM::weights_metadata() const {
  return {{"format", "pt"},
          {"model", cfg_.shape.name},
          {"model_type", cfg_.shape.model_type},
          {"config", cfg_.hf.dump()}};
}

HfWeightRules SpecDecoderLM::weight_rules() const {
  HfWeightRules r;
  if (spec().tie_word_embeddings) {
    r.tied_name = spec().head_name + ".weight";
    r.tied_to = spec().embed_name;
  }
  return r;
}

void SpecDecoderLM::init_weights(uint64_t seed) {
  init_normal_weights(seed, spec().init_std);
}

FlopsPerToken decoder_flops_per_token(const DecoderLMSpec& s, int64_t T) {
  const nn::AttentionConfig& a = s.layer.attn;
  const int64_t head_dim = a.head_dim > 0 ? a.head_dim : a.hidden / a.num_heads;
  const int64_t kv_heads = a.num_kv_heads > 0 ? a.num_kv_heads : a.num_heads;
  const double H = static_cast<double>(s.hidden);
  const double I = static_cast<double>(s.layer.mlp.intermediate);
  const double Q = static_cast<double>(a.num_heads * head_dim);
  const double K = static_cast<double>(kv_heads * head_dim);
  const double L = static_cast<double>(s.layers);
  const double mlp = s.layer.mlp.act == nn::Activation::silu_gated ? 3.0 : 2.0;
  // Every product is a whole number below 2^53: exact, whatever the order.
  FlopsPerToken f;
  f.layer_gemm = 2.0 * L * (2.0 * H * Q + 2.0 * H * K + mlp * H * I);
  f.head = 2.0 * static_cast<double>(s.vocab) * H;
  f.attention = 2.0 * L * static_cast<double>(T) * Q;
  return f;
}

int64_t gpt_block_activation_bytes(const ModelConfig& cfg, int64_t s, int64_t b, int64_t e,
                                   bool keep_scores) {
  const int64_t h = cfg.shape.n_embd, a = cfg.shape.n_head;
  return s * b * h * (16 * e + 2) + (keep_scores ? a * s * s * b * (2 * e + 1) : 0);
}

}  // namespace snug

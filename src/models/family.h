// The parts a family's registry entry (models/registry.h, Architecture) is built from, so that
// an entry reads as data and no family copies another's glue:
//   - family_model<M>: the family's own model class behind a Model;
//   - create_model_as<M, config_of>: Architecture::create for a family with a class of its own;
//   - SpecDecoderLM and create_decoder<spec_of>: the model of a decoder family that is its spec
//     and its resolved config.json (llama/mistral/qwen2, gpt_neox, and a new decoder family:
//     its config reader and its spec are all it writes; tests/models/toy_family_test.cpp);
//   - the planner's formulas that several families share.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/error.h"
#include "models/decoder_lm.h"
#include "models/hf_weights.h"
#include "models/model_config.h"
#include "models/registry.h"

namespace snug {

// `m` as the family's model class M (the registry hands a family only its own models).
template <class M>
const M& family_model(const Model& m) {
  const M* f = dynamic_cast<const M*>(&m);
  SNUG_ASSERT(f != nullptr, "a ", m.summary().model_type, " model of another class");
  return *f;
}

// Architecture::create for a family whose model class M is built from its own config type,
// `config_of(const ModelConfig&)`.
template <class M, auto config_of>
std::unique_ptr<Model> create_model_as(const ModelConfig& cfg, Device& dev, DType param_dtype,
                                       const std::optional<WeightQuantConfig>& quant) {
  return std::make_unique<M>(config_of(cfg), dev, param_dtype, quant);
}

// A decoder family's model that is its spec and its resolved config: the summary is the
// config's shape, the weights metadata "format": "pt", the model's name and model_type and the
// resolved config.json ("config"), the initialization transformers' default _init_weights with
// the spec's init_std (DecoderLM::init_normal_weights).
class SpecDecoderLM final : public DecoderLM {
 public:
  SpecDecoderLM(const ModelConfig& cfg, const DecoderLMSpec& spec, Device& dev,
                DType param_dtype = DType::f32,
                const std::optional<WeightQuantConfig>& quant = std::nullopt);

  const ModelConfig& config() const { return cfg_; }
  // A Hugging Face checkpoint's rules for this model (models/hf_weights.h): with a tied head,
  // the head's weight may be there, equal to the token embedding. The family adds its own.
  HfWeightRules weight_rules() const;
  ModelSummary summary() const override { return cfg_.shape; }
  std::map<std::string, std::string> weights_metadata() const override;
  void init_weights(uint64_t seed) override;

 private:
  ModelConfig cfg_;
};

// A spec from a family config with transformers' common field names (name, vocab_size,
// hidden_size, num_hidden_layers, max_position_embeddings, tie_word_embeddings,
// initializer_range) and its layer; the Hugging Face names are the spec's defaults (Llama's).
template <class C>
DecoderLMSpec common_spec(const C& c, const nn::DecoderLayerConfig& layer) {
  DecoderLMSpec s{.name = c.name,
                  .vocab = c.vocab_size,
                  .hidden = c.hidden_size,
                  .layers = c.num_hidden_layers,
                  .max_positions = c.max_position_embeddings};
  s.layer = layer;
  s.tie_word_embeddings = c.tie_word_embeddings;
  s.init_std = static_cast<float>(c.initializer_range);
  return s;
}

// Architecture::create of a decoder family: its spec of a resolved ModelConfig.
template <DecoderLMSpec (*spec_of)(const ModelConfig&)>
std::unique_ptr<Model> create_decoder(const ModelConfig& cfg, Device& dev, DType param_dtype,
                                      const std::optional<WeightQuantConfig>& quant) {
  return std::make_unique<SpecDecoderLM>(cfg, spec_of(cfg), dev, param_dtype, quant);
}

// Forward FLOPs per token of a decoder's spec: 2 per weight of each layer's GEMMs (q and o H x Q,
// k and v H x K, the MLP's two H x I matrices, three when gated), the head V x H, and causal
// attention 2 T Q per layer (QK^T and PV over (T+1)/2 keys on average); Q = heads * head_dim,
// K = kv heads * head_dim.
FlopsPerToken decoder_flops_per_token(const DecoderLMSpec& s, int64_t T);
// Architecture::flops_per_token of a decoder family: the same of its spec.
template <DecoderLMSpec (*spec_of)(const ModelConfig&)>
FlopsPerToken decoder_flops(const ModelConfig& cfg, int64_t T) {
  return decoder_flops_per_token(spec_of(cfg), T);
}

// The activation bytes of a GPT-style block (GPT-2's, BERT's encoder layer): Korthikanti et al.
// 2022's s b h (16 e + 2), plus a s^2 b (2 e + 1) when the attention scores are kept (naive
// attention without selective recomputation); h = n_embd, a = n_head.
int64_t gpt_block_activation_bytes(const ModelConfig& cfg, int64_t s, int64_t b, int64_t e,
                                   bool keep_scores);

}  // namespace snug

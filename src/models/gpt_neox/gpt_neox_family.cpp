// GPT-NeoX's entry in the registry of model families (models/registry.h).
#include "models/family.h"
#include "models/gpt_neox/gpt_neox.h"
#include "models/gpt_neox/gpt_neox_config.h"

namespace snug {

namespace {

ModelConfig neox_from_json(const nlohmann::json& j, const std::string& spec,
                           const std::string& name) {
  return gpt_neox_model_config(parse_gpt_neox_config(j, spec, name));
}

// The causal-mask and rotary buffers older transformers versions saved are ignored;
// embed_out.weight is absent when tied.
HfWeightRules neox_hf_rules(const Model& model) {
  HfWeightRules r = family_model<SpecDecoderLM>(model).weight_rules();
  r.ignored_suffixes = {".attention.bias", ".attention.masked_bias", ".rotary_emb.inv_freq"};
  return r;
}

// One block's saved tensors per row (s b rows, e bytes per element): the two norms' inputs and
// outputs (4h; the parallel residual reads x twice but keeps it once: 3h), q, k, v and the
// attention output (4h), the MLP's pre-activation and activation (2I); no dropout masks. With
// the scores kept (naive attention): the a s^2 b probabilities.
int64_t neox_layer_activation_bytes(const ModelConfig& cfg, int64_t s, int64_t b, int64_t e,
                                    bool keep_scores) {
  const GPTNeoXConfig c = gpt_neox_config(cfg);
  const int64_t h = c.hidden_size, I = c.intermediate_size, a = c.num_attention_heads;
  const int64_t norms = c.use_parallel_residual ? 3 * h : 4 * h;
  return s * b * e * (norms + 4 * h + 2 * I) + (keep_scores ? a * s * s * b * e : 0);
}

}  // namespace

const Architecture& gpt_neox_architecture() {
  static const Architecture a{.model_type = "gpt_neox",
                              .presets = gpt_neox_presets(),
                              .preset_config = gpt_neox_preset_config,
                              .parse = neox_from_json,
                              .create = create_decoder<gpt_neox_spec>,
                              .weight_rules = neox_hf_rules,
                              .flops_per_token = decoder_flops<gpt_neox_spec>,
                              .layer_activation_bytes = neox_layer_activation_bytes,
                              .hf_class = "GPTNeoXForCausalLM",
                              .default_lora_targets = "query_key_value"};
  return a;
}

}  // namespace snug

// The registry entries (models/registry.h) of the Llama-shaped families: llama, mistral and
// qwen2 share everything but their config.json keys, defaults and presets.
#include "models/family.h"
#include "models/llama/llama.h"
#include "models/llama/llama_config.h"

namespace snug {

namespace {

template <LlamaVariant V>
ModelConfig llama_from_json(const nlohmann::json& j, const std::string& spec,
                            const std::string& name) {
  return llama_model_config(parse_llama_config(V, j, spec, name));
}

// lm_head.weight is absent when tied (accepted when equal to model.embed_tokens.weight); the
// rotary inv_freq buffers of older checkpoints are ignored.
HfWeightRules llama_hf_rules(const Model& model) {
  HfWeightRules r = family_model<SpecDecoderLM>(model).weight_rules();
  r.ignored_suffixes = {".rotary_emb.inv_freq"};
  return r;
}

// One block's saved tensors for backward per row (s b rows, e bytes per element, as Korthikanti
// et al. count): the two norms' inputs and outputs (4h), q and the attention output (2Q), k and
// v (2K), gate, up and the activation's output (3I); no dropout masks. With the scores kept
// (naive attention): the a s^2 b probabilities.
int64_t llama_layer_activation_bytes(const ModelConfig& cfg, int64_t s, int64_t b, int64_t e,
                                     bool keep_scores) {
  const LlamaConfig c = llama_config(cfg);
  const int64_t h = c.hidden_size, I = c.intermediate_size;
  const int64_t Q = c.num_attention_heads * c.head_dim, K = c.num_key_value_heads * c.head_dim;
  const int64_t a = c.num_attention_heads;
  return s * b * e * (4 * h + 2 * Q + 2 * K + 3 * I) + (keep_scores ? a * s * s * b * e : 0);
}

template <LlamaVariant V>
const Architecture& entry(const char* type, const char* hf_class) {
  static const Architecture a{.model_type = type,
                              .presets = llama_presets(V),
                              .preset_config = llama_preset_config,
                              .parse = llama_from_json<V>,
                              .create = create_decoder<llama_spec>,
                              .weight_rules = llama_hf_rules,
                              .flops_per_token = decoder_flops<llama_spec>,
                              .layer_activation_bytes = llama_layer_activation_bytes,
                              .hf_class = hf_class,
                              .default_lora_targets = "q_proj,v_proj"};
  return a;
}

}  // namespace

const Architecture& llama_architecture() {
  return entry<LlamaVariant::llama>("llama", "LlamaForCausalLM");
}
const Architecture& mistral_architecture() {
  return entry<LlamaVariant::mistral>("mistral", "MistralForCausalLM");
}
const Architecture& qwen2_architecture() {
  return entry<LlamaVariant::qwen2>("qwen2", "Qwen2ForCausalLM");
}

}  // namespace snug

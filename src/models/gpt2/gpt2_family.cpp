// GPT-2's entry in the registry of model families (models/registry.h).
#include "models/family.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_config.h"
#include "models/gpt2/gpt2_weights.h"

namespace snug {

namespace {

ModelConfig gpt2_from_json(const nlohmann::json& j, const std::string& spec,
                           const std::string& name) {
  return gpt2_model_config(parse_gpt2_config(j, spec, name));
}

HfWeightRules gpt2_hf_rules(const Model& model) {
  return gpt2_weight_rules(family_model<GPT2>(model).config());
}

}  // namespace

const Architecture& gpt2_architecture() {
  static const Architecture a{
      .model_type = "gpt2",
      .presets = gpt2_presets(),
      .preset_config = gpt2_preset_config,
      .parse = gpt2_from_json,
      .keys = {.n_layer = "n_layer",
               .n_embd = "n_embd",
               .n_head = "n_head",
               .vocab_size = "vocab_size",
               .n_positions = "n_positions"},
      .create = create_model_as<GPT2, gpt2_config>,
      .weight_rules = gpt2_hf_rules,
      // 12 C^2 weights per block in its four GEMMs (c_attn 3C^2, c_proj C^2, c_fc 4C^2, mlp
      // c_proj 4C^2), the tied head V C, causal attention 2 T C per block.
      .flops_per_token = decoder_flops<gpt2_spec>,
      // A GPT block without dropout: Korthikanti et al.'s count (models/family.h).
      .layer_activation_bytes = gpt_block_activation_bytes,
      .hf_class = "GPT2LMHeadModel",
      .default_lora_targets = "c_attn"};
  return a;
}

}  // namespace snug

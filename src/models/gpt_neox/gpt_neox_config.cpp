#include "models/gpt_neox/gpt_neox_config.h"

#include <cmath>

#include "core/error.h"
#include "io/excerpt.h"
#include "models/config_reader.h"
#include "models/presets.h"

namespace snug {

namespace {

long double neox_params_exact(const GPTNeoXConfig& c) {
  const long double H = static_cast<long double>(c.hidden_size);
  const long double I = static_cast<long double>(c.intermediate_size);
  const long double V = static_cast<long double>(c.vocab_size);
  const long double layer =
      4 * H + 3 * H * H + H * H + (c.attention_bias ? 4 * H : 0) + 2 * H * I + I + H;
  return V * H * (c.tie_word_embeddings ? 1 : 2) +
         static_cast<long double>(c.num_hidden_layers) * layer + 2 * H;
}

struct NeoxPreset {
  const char* name;
  const char* alias;
  const char* config;
};
// polyglot-ko-1.3b (EleutherAI): 24 layers of 2048, 16 heads, half of each head rotary, the
// 30080-token padded vocabulary, parallel residual. gpt-neox-tiny: byte-level vocabulary.
const NeoxPreset kNeoxPresets[] = {
    {"gpt-neox-tiny", "", R"({
      "vocab_size": 256, "hidden_size": 128, "intermediate_size": 512, "num_hidden_layers": 4,
      "num_attention_heads": 4, "max_position_embeddings": 256, "rotary_pct": 0.25,
      "rotary_emb_base": 10000, "use_parallel_residual": true, "hidden_act": "gelu",
      "layer_norm_eps": 1e-5, "tie_word_embeddings": false})"},
    {"polyglot-ko-1.3b", "", R"({
      "vocab_size": 30080, "hidden_size": 2048, "intermediate_size": 8192,
      "num_hidden_layers": 24, "num_attention_heads": 16, "max_position_embeddings": 2048,
      "rotary_pct": 0.5, "rotary_emb_base": 10000, "use_parallel_residual": true,
      "hidden_act": "gelu", "layer_norm_eps": 1e-5, "initializer_range": 0.02,
      "tie_word_embeddings": false, "bos_token_id": 0, "eos_token_id": 2})"},
};

}  // namespace

int64_t GPTNeoXConfig::num_params() const {
  return static_cast<int64_t>(neox_params_exact(*this));
}

GPTNeoXConfig parse_gpt_neox_config(const nlohmann::json& j, const std::string& spec,
                                    const std::string& name) {
  ConfigReader r(j, spec, "gpt_neox");
  GPTNeoXConfig c;
  c.name = name;
  c.vocab_size = r.integer("vocab_size", 50432);
  c.hidden_size = r.integer("hidden_size", 6144);
  c.intermediate_size = r.integer("intermediate_size", 24576);
  c.num_hidden_layers = r.integer("num_hidden_layers", 44);
  c.num_attention_heads = r.integer("num_attention_heads", 64);
  c.max_position_embeddings = r.integer("max_position_embeddings", 2048);
  c.layer_norm_eps = static_cast<float>(r.number("layer_norm_eps", 1e-5));
  c.initializer_range = r.number("initializer_range", 0.02);
  c.use_parallel_residual = r.boolean("use_parallel_residual", true);
  c.attention_bias = r.boolean("attention_bias", true);
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  r.zero_dropout("attention_dropout");
  r.zero_dropout("hidden_dropout");
  r.accept("classifier_dropout");  // the token-classification head's, not the causal LM's
  const std::string act = r.string("hidden_act", "gelu");
  if (act == "gelu")
    c.gelu_exact = true;
  else if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast")
    c.gelu_exact = false;
  else
    r.fail("hidden_act", "is '" + excerpt(act) +
                             "'; gpt_neox is implemented with gelu (exact erf) and its tanh "
                             "approximations gelu_new, gelu_pytorch_tanh, gelu_fast");
  if (const nlohmann::json* s = r.raw("rope_scaling"))
    r.fail("rope_scaling",
           "is " + excerpt(s->dump()) + ": rope scaling is not implemented for gpt_neox");
  if (r.has("rope_parameters")) {
    // transformers v5: {"rope_type": "default", "rope_theta": ..., "partial_rotary_factor": ...}
    for (const char* k : {"rotary_pct", "rotary_emb_base"})
      if (r.has(k)) r.fail(k, "is given beside 'rope_parameters'; give one");
    const nlohmann::json& p = *r.raw("rope_parameters");
    if (!p.is_object()) r.fail("rope_parameters", "must be an object");
    for (const auto& [k, v] : p.items()) {
      if (k == "rope_type" || k == "type") {
        if (v != "default")
          r.fail("rope_parameters", "has rope type " + excerpt(v.dump()) +
                                        "; gpt_neox is implemented with the default rope only");
      } else if (k == "rope_theta" || k == "partial_rotary_factor") {
        if (!v.is_number() || !std::isfinite(v.get<double>()))
          r.fail("rope_parameters", "'" + excerpt(k) + "' must be a finite number");
        (k == "rope_theta" ? c.rotary_emb_base : c.rotary_pct) = v.get<double>();
      } else {
        r.fail("rope_parameters",
               "has '" + excerpt(k) + "', which snug does not implement for gpt_neox");
      }
    }
  } else {
    r.accept("rope_parameters");  // null
    c.rotary_pct = r.number("rotary_pct", 0.25);
    c.rotary_emb_base = r.number("rotary_emb_base", 10000.0);
  }
  r.finish();
  c.hf = r.resolved();
  c.hf["model_type"] = "gpt_neox";

  r.dimensions({{"vocab_size", c.vocab_size},
                {"hidden_size", c.hidden_size},
                {"intermediate_size", c.intermediate_size},
                {"num_hidden_layers", c.num_hidden_layers},
                {"num_attention_heads", c.num_attention_heads},
                {"max_position_embeddings", c.max_position_embeddings}});
  if (c.hidden_size % c.num_attention_heads != 0)
    r.fail("num_attention_heads",
           detail::concat(c.num_attention_heads, " does not divide hidden_size ", c.hidden_size));
  if (!(c.rotary_pct > 0 && c.rotary_pct <= 1))
    r.fail("rotary_pct", detail::concat(c.rotary_pct, " must be in (0, 1]"));
  const int64_t R = c.rotary_dim();
  if (R <= 0 || R % 2 != 0)
    r.fail("rotary_pct", detail::concat("gives ", R, " rotary dims of a head of ", c.head_dim(),
                                        "; they must be a positive even number"));
  if (!(c.rotary_emb_base > 0))
    r.fail("rotary_emb_base", detail::concat(c.rotary_emb_base, " must be positive"));
  if (!(std::isfinite(c.layer_norm_eps) && c.layer_norm_eps > 0))
    r.fail("layer_norm_eps", detail::concat(c.layer_norm_eps, " must be positive"));
  if (!(c.initializer_range >= 0))
    r.fail("initializer_range", detail::concat(c.initializer_range, " must be >= 0"));
  r.param_count(neox_params_exact(c));
  return c;
}

GPTNeoXConfig gpt_neox_config(const ModelConfig& cfg) {
  SNUG_CHECK(cfg.shape.model_type == "gpt_neox", "model '", cfg.shape.name, "' is ",
             cfg.shape.model_type, ", not gpt_neox");
  return parse_gpt_neox_config(cfg.hf, cfg.shape.name, cfg.shape.name);
}

ModelConfig gpt_neox_model_config(const GPTNeoXConfig& c) {
  return common_shape_config(c, "gpt_neox", c.hf);
}

const std::vector<std::pair<std::string, std::string>>& gpt_neox_presets() {
  static const auto names = preset_names(kNeoxPresets);
  return names;
}

nlohmann::json gpt_neox_preset_config(const std::string& name) {
  nlohmann::json j = nlohmann::json::parse(find_preset(kNeoxPresets, name, "gpt_neox").config);
  j["model_type"] = "gpt_neox";
  return j;
}

}  // namespace snug

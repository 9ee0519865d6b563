#include "models/llama/llama_config.h"

#include <cmath>
#include <set>

#include "core/error.h"
#include "io/excerpt.h"
#include "models/config_reader.h"

namespace snug {

namespace {

// transformers' class defaults (configuration_{llama,mistral,qwen2}.py).
struct Defaults {
  const char* type;
  int64_t vocab, hidden, intermediate, layers, heads;
  std::optional<int64_t> kv_heads;  // nullopt: = heads
  int64_t max_positions;
};
Defaults defaults(LlamaVariant v) {
  switch (v) {
    case LlamaVariant::llama:
      return {"llama", 32000, 4096, 11008, 32, 32, std::nullopt, 2048};
    case LlamaVariant::mistral:
      return {"mistral", 32000, 4096, 14336, 32, 32, 8, 131072};
    case LlamaVariant::qwen2:
      return {"qwen2", 151936, 4096, 22016, 32, 32, 32, 32768};
  }
  return {};
}

// A rope_scaling / rope_parameters object: its type and parameters. `key` names it in messages;
// `params` says whether rope_theta and partial_rotary_factor live inside (v5's rope_parameters).
void read_rope(const ConfigReader& r, const std::string& key, const nlohmann::json& j, bool params,
               LlamaRope& rope) {
  if (!j.is_object()) r.fail(key, "must be an object or null, got " + excerpt(j.dump()));
  std::string type;
  for (const char* k : {"rope_type", "type"})
    if (j.contains(k)) {
      if (!j[k].is_string()) r.fail(key, detail::concat("'", k, "' must be a string"));
      const std::string t = j[k].get<std::string>();
      if (!type.empty() && t != type)
        r.fail(key,
               detail::concat("gives two types, '", excerpt(type), "' and '", excerpt(t), "'"));
      type = t;
    }
  if (type.empty()) r.fail(key, "has no 'rope_type' (or 'type')");
  std::set<std::string> allowed = {"rope_type", "type"};
  auto num = [&](const char* k, double& out, bool required) {
    allowed.insert(k);
    if (!j.contains(k) || j[k].is_null()) {
      if (required) r.fail(key, detail::concat("of type '", excerpt(type), "' needs '", k, "'"));
      return;
    }
    if (!j[k].is_number() || !std::isfinite(j[k].get<double>()))
      r.fail(key, detail::concat("'", k, "' must be a finite number, got ", excerpt(j[k].dump())));
    out = j[k].get<double>();
  };
  if (params) {
    num("rope_theta", rope.theta, false);
    num("partial_rotary_factor", rope.partial_rotary_factor, false);
  }
  if (type == "default") {
    rope.type = LlamaRope::Type::none;
  } else if (type == "linear") {
    rope.type = LlamaRope::Type::linear;
    num("factor", rope.factor, true);
    if (!(rope.factor >= 1.0))
      r.fail(key, detail::concat("'factor' ", rope.factor, " must be >= 1"));
  } else if (type == "llama3") {
    rope.type = LlamaRope::Type::llama3;
    double orig = 0;
    num("factor", rope.factor, true);
    num("low_freq_factor", rope.low_freq_factor, true);
    num("high_freq_factor", rope.high_freq_factor, true);
    num("original_max_position_embeddings", orig, true);
    if (!(rope.factor >= 1.0))
      r.fail(key, detail::concat("'factor' ", rope.factor, " must be >= 1"));
    if (!(rope.low_freq_factor > 0 && rope.high_freq_factor > rope.low_freq_factor))
      r.fail(key, detail::concat("needs 0 < low_freq_factor < high_freq_factor, got ",
                                 rope.low_freq_factor, " and ", rope.high_freq_factor));
    if (!(orig >= 1 && orig <= kMaxConfigDim && std::trunc(orig) == orig))
      r.fail(key, detail::concat("'original_max_position_embeddings' ", orig,
                                 " must be a positive integer"));
    rope.original_max_position_embeddings = static_cast<int64_t>(orig);
  } else {
    r.fail(key, detail::concat("has rope type '", excerpt(type),
                               "', which snug does not implement (supported: default, linear, "
                               "llama3)"));
  }
  for (const auto& [k, v] : j.items())
    if (allowed.count(k) == 0)
      r.fail(key,
             detail::concat("has '", excerpt(k), "', which snug does not implement for rope type '",
                            excerpt(type), "'"));
}

long double llama_params_exact(const LlamaConfig& c) {
  const long double H = static_cast<long double>(c.hidden_size);
  const long double I = static_cast<long double>(c.intermediate_size);
  const long double V = static_cast<long double>(c.vocab_size);
  const long double Q = static_cast<long double>(c.num_attention_heads * c.head_dim);
  const long double K = static_cast<long double>(c.num_key_value_heads * c.head_dim);
  const long double layer = H * Q + 2 * H * K + Q * H + (c.qkv_bias ? Q + 2 * K : 0) +
                            (c.o_bias ? H : 0) + 3 * H * I + (c.mlp_bias ? 2 * I + H : 0) + 2 * H;
  return V * H * (c.tie_word_embeddings ? 1 : 2) +
         static_cast<long double>(c.num_hidden_layers) * layer + H;
}

}  // namespace

const char* LlamaConfig::model_type() const {
  return defaults(variant).type;
}

int64_t LlamaConfig::rotary_dim() const {
  return static_cast<int64_t>(static_cast<double>(head_dim) * rope.partial_rotary_factor);
}

int64_t LlamaConfig::num_params() const {
  return static_cast<int64_t>(llama_params_exact(*this));
}

std::vector<float> LlamaConfig::rope_inv_freq() const {
  if (rope.type == LlamaRope::Type::none) return {};
  const int64_t R = rotary_dim();
  const float theta = static_cast<float>(rope.theta);
  std::vector<float> inv(static_cast<size_t>(R / 2));
  for (int64_t j = 0; j < R / 2; ++j)
    inv[j] = 1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(R));
  const float f = static_cast<float>(rope.factor);
  if (rope.type == LlamaRope::Type::linear) {
    for (float& v : inv) v /= f;
    return inv;
  }
  // llama3 (Llama 3.1): wavelengths longer than original/low_freq_factor are slowed by the
  // factor, shorter than original/high_freq_factor kept, and the band between interpolated.
  const float lo = static_cast<float>(rope.low_freq_factor);
  const float hi = static_cast<float>(rope.high_freq_factor);
  const float old_len = static_cast<float>(rope.original_max_position_embeddings);
  const float low_wavelen = old_len / lo, high_wavelen = old_len / hi;
  for (float& v : inv) {
    const float wavelen = static_cast<float>(2.0 * M_PI) / v;
    const float scaled = wavelen > low_wavelen ? v / f : v;
    if (wavelen < high_wavelen || wavelen > low_wavelen) {
      v = scaled;
    } else {
      const float s = (old_len / wavelen - lo) / (hi - lo);
      v = (1.0f - s) * scaled / f + s * scaled;
    }
  }
  return inv;
}

LlamaConfig parse_llama_config(LlamaVariant variant, const nlohmann::json& j,
                               const std::string& spec, const std::string& name) {
  const Defaults d = defaults(variant);
  ConfigReader r(j, spec, d.type);
  LlamaConfig c;
  c.name = name;
  c.variant = variant;
  c.vocab_size = r.integer("vocab_size", d.vocab);
  c.hidden_size = r.integer("hidden_size", d.hidden);
  c.intermediate_size = r.integer("intermediate_size", d.intermediate);
  c.num_hidden_layers = r.integer("num_hidden_layers", d.layers);
  c.num_attention_heads = r.integer("num_attention_heads", d.heads);
  if (d.kv_heads)
    c.num_key_value_heads = r.integer("num_key_value_heads", *d.kv_heads);
  else
    c.num_key_value_heads =
        r.optional_integer("num_key_value_heads").value_or(c.num_attention_heads);
  const std::optional<int64_t> head_dim = r.optional_integer("head_dim");
  c.max_position_embeddings = r.integer("max_position_embeddings", d.max_positions);
  c.initializer_range = r.number("initializer_range", 0.02);
  c.rms_norm_eps = static_cast<float>(r.number("rms_norm_eps", 1e-6));
  c.tie_word_embeddings = r.boolean("tie_word_embeddings", false);
  r.zero_dropout("attention_dropout");
  const std::string act = r.string("hidden_act", "silu");
  if (act != "silu" && act != "swish")
    r.fail("hidden_act",
           "is '" + excerpt(act) + "'; " + d.type + " is implemented with silu (SwiGLU) only");
  // pretraining_tp > 1 split the GEMMs in older transformers: the same product.
  if (r.integer("pretraining_tp", 1) < 1) r.fail("pretraining_tp", "must be positive");

  // Rotary: v4's top-level rope_theta / rope_scaling (/ partial_rotary_factor), or v5's
  // rope_parameters holding all of them.
  if (r.has("rope_parameters")) {
    for (const char* k : {"rope_theta", "rope_scaling"})
      if (r.has(k))
        r.fail(k, "is given beside 'rope_parameters'; give one (rope_parameters holds it)");
    read_rope(r, "rope_parameters", *r.raw("rope_parameters"), true, c.rope);
  } else {
    r.accept("rope_parameters");  // null
    c.rope.theta = r.number("rope_theta", 10000.0);
    if (const nlohmann::json* s = r.raw("rope_scaling"))
      read_rope(r, "rope_scaling", *s, false, c.rope);
  }
  if (r.has("partial_rotary_factor"))
    c.rope.partial_rotary_factor = r.number("partial_rotary_factor", 1.0);
  if (!(c.rope.theta > 0)) r.fail("rope_theta", detail::concat(c.rope.theta, " must be positive"));
  if (!(c.rope.partial_rotary_factor > 0 && c.rope.partial_rotary_factor <= 1))
    r.fail("partial_rotary_factor",
           detail::concat(c.rope.partial_rotary_factor, " must be in (0, 1]"));

  switch (variant) {
    case LlamaVariant::llama: {
      const bool attention_bias = r.boolean("attention_bias", false);
      c.qkv_bias = c.o_bias = attention_bias;
      c.mlp_bias = r.boolean("mlp_bias", false);
      break;
    }
    case LlamaVariant::mistral:
      // Missing: MistralConfig's default 4096; null: no window.
      if (j.contains("sliding_window"))
        c.sliding_window = r.optional_integer("sliding_window");
      else
        c.sliding_window = r.integer("sliding_window", 4096);
      if (c.sliding_window && *c.sliding_window <= 0)
        r.fail("sliding_window", detail::concat(*c.sliding_window, " must be positive or null"));
      break;
    case LlamaVariant::qwen2: {
      c.qkv_bias = true;
      if (r.boolean("use_sliding_window", false))
        r.fail("use_sliding_window",
               "is true: snug has no sliding-window attention yet (set it to false to train with "
               "full causal attention)");
      // Without use_sliding_window these only say where a window would apply.
      r.accept("sliding_window");
      r.accept("max_window_layers");
      if (const nlohmann::json* lt = r.raw("layer_types")) {
        if (!lt->is_array()) r.fail("layer_types", "must be a list");
        for (const nlohmann::json& t : *lt)
          if (t != "full_attention")
            r.fail("layer_types",
                   "lists " + excerpt(t.dump()) + "; snug implements full_attention layers only");
      }
      break;
    }
  }
  r.finish();
  c.hf = r.resolved();
  c.hf["model_type"] = d.type;
  // Qwen2Config has no head_dim argument: a null one would reach Qwen2Attention as None.
  if (variant == LlamaVariant::qwen2 && c.hf["head_dim"].is_null()) c.hf.erase("head_dim");

  r.dimensions({{"vocab_size", c.vocab_size},
                {"hidden_size", c.hidden_size},
                {"intermediate_size", c.intermediate_size},
                {"num_hidden_layers", c.num_hidden_layers},
                {"num_attention_heads", c.num_attention_heads},
                {"num_key_value_heads", c.num_key_value_heads},
                {"max_position_embeddings", c.max_position_embeddings}});
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    r.fail("num_key_value_heads", detail::concat(c.num_key_value_heads, " does not divide the ",
                                                 c.num_attention_heads, " attention heads"));
  if (head_dim) {
    r.dimension("head_dim", *head_dim);
    c.head_dim = *head_dim;
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      r.fail("num_attention_heads",
             detail::concat(c.num_attention_heads, " does not divide hidden_size ", c.hidden_size,
                            " (and no head_dim is given)"));
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.num_attention_heads * c.head_dim > kMaxConfigDim) r.fail("head_dim", "is out of range");
  const int64_t R = c.rotary_dim();
  if (R <= 0 || R % 2 != 0)
    r.fail(c.rope.partial_rotary_factor != 1.0 ? "partial_rotary_factor"
           : head_dim                          ? "head_dim"
                                               : "num_attention_heads",
           detail::concat("gives ", R, " rotary dims of a head of ", c.head_dim,
                          "; they must be a positive even number"));
  if (!(std::isfinite(c.rms_norm_eps) && c.rms_norm_eps > 0))
    r.fail("rms_norm_eps", detail::concat(c.rms_norm_eps, " must be positive"));
  if (!(c.initializer_range >= 0))
    r.fail("initializer_range", detail::concat(c.initializer_range, " must be >= 0"));
  r.param_count(llama_params_exact(c));
  return c;
}

LlamaConfig llama_config(const ModelConfig& cfg) {
  const std::string& t = cfg.shape.model_type;
  const LlamaVariant v =
      t == "llama"     ? LlamaVariant::llama
      : t == "mistral" ? LlamaVariant::mistral
      : t == "qwen2"
          ? LlamaVariant::qwen2
          : throw Error("model '" + cfg.shape.name + "' is " + t + ", not llama, mistral or qwen2");
  return parse_llama_config(v, cfg.hf, cfg.shape.name, cfg.shape.name);
}

ModelConfig llama_model_config(const LlamaConfig& c) {
  return common_shape_config(c, c.model_type(), c.hf);
}

}  // namespace snug

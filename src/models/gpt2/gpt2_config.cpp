#include "models/gpt2/gpt2_config.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/config_reader.h"
#include "models/presets.h"
#include "models/registry.h"

namespace snug {

namespace {
struct Gpt2Preset {
  const char* name;
  const char* alias;
  int64_t vocab, positions, embd, layers, heads;
};
// gpt2-tiny is ours: byte-level vocabulary (the built-in dataset's tokenizer), small enough to
// train in seconds on two cores. The others are OpenAI's GPT-2 sizes.
constexpr Gpt2Preset kGpt2Presets[] = {
    {"gpt2-tiny", "tiny", 256, 256, 128, 4, 4},
    {"gpt2-124m", "gpt2", 50257, 1024, 768, 12, 12},
    {"gpt2-350m", "gpt2-medium", 50257, 1024, 1024, 24, 16},
    {"gpt2-774m", "gpt2-large", 50257, 1024, 1280, 36, 20},
    {"gpt2-1.5b", "gpt2-xl", 50257, 1024, 1600, 48, 25},
};
}  // namespace

int64_t GPT2Config::num_params() const {
  const int64_t C = n_embd;
  return vocab_size * C + n_positions * C + n_layer * (12 * C * C + 13 * C) + 2 * C;
}

namespace {
// Each dimension fits an int32 index, and the parameter count (num_params(), and the bytes of
// its weights, gradients and state at up to 16 bytes each) fits an int64.
constexpr long double kMaxParams = 0x1p58L;
long double gpt2_params_exact(const GPT2Config& c) {
  const long double C = static_cast<long double>(c.n_embd);
  return static_cast<long double>(c.vocab_size) * C + static_cast<long double>(c.n_positions) * C +
         static_cast<long double>(c.n_layer) * (12 * C * C + 13 * C) + 2 * C;
}
}  // namespace

void GPT2Config::validate() const {
  SNUG_CHECK(vocab_size > 0 && n_positions > 0 && n_embd > 0 && n_layer > 0 && n_head > 0,
             "model '", name, "': every dimension must be positive");
  SNUG_CHECK(n_positions <= kMaxConfigDim && n_embd <= kMaxConfigDim && n_layer <= kMaxConfigDim &&
                 n_head <= kMaxConfigDim,
             "model '", name, "': a dimension is out of range (at most ", kMaxConfigDim, ")");
  SNUG_CHECK(gpt2_params_exact(*this) <= kMaxParams, "model '", name, "': about ",
             static_cast<double>(gpt2_params_exact(*this)),
             " parameters, out of range (at most 2^58)");
  // LayerNorm divides by sqrt(var + eps): eps <= 0 gives inf/nan on a constant row, which would
  // surface as a NaN loss blamed on the learning rate.
  SNUG_CHECK(std::isfinite(layer_norm_epsilon) && layer_norm_epsilon > 0, "model '", name,
             "': layer_norm_epsilon ", layer_norm_epsilon, " must be positive and finite");
  SNUG_CHECK(n_embd % n_head == 0, "model '", name, "': n_embd ", n_embd,
             " is not divisible by n_head ", n_head);
  SNUG_CHECK(vocab_size <= (int64_t{1} << 31) - 1, "model '", name, "': vocab_size too large");
}

const std::vector<std::pair<std::string, std::string>>& gpt2_presets() {
  static const auto names = preset_names(kGpt2Presets);
  return names;
}

nlohmann::json gpt2_config_json(const GPT2Config& c) {
  return {{"model_type", "gpt2"},
          {"vocab_size", c.vocab_size},
          {"n_positions", c.n_positions},
          {"n_embd", c.n_embd},
          {"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"layer_norm_epsilon", c.layer_norm_epsilon}};
}

nlohmann::json gpt2_preset_config(const std::string& name) {
  const Gpt2Preset& p = find_preset(kGpt2Presets, name, "GPT-2");
  return gpt2_config_json({.vocab_size = p.vocab,
                           .n_positions = p.positions,
                           .n_embd = p.embd,
                           .n_layer = p.layers,
                           .n_head = p.heads});
}

GPT2Config parse_gpt2_config(const nlohmann::json& j, const std::string& spec,
                             const std::string& name) {
  const ConfigKeys k(j, spec, false);
  GPT2Config c;
  c.name = name;
  k.integer("vocab_size", c.vocab_size, true);
  k.integer("n_embd", c.n_embd, true);
  k.integer("n_layer", c.n_layer, true);
  k.integer("n_head", c.n_head, true);
  k.integer("n_positions", c.n_positions, false);
  double eps = c.layer_norm_epsilon;
  k.number("layer_norm_epsilon", eps);
  c.layer_norm_epsilon = static_cast<float>(eps);
  c.validate();
  return c;
}

ModelConfig gpt2_model_config(const GPT2Config& c) {
  return shape_config({.name = c.name,
                       .model_type = "gpt2",
                       .n_layer = c.n_layer,
                       .n_embd = c.n_embd,
                       .n_head = c.n_head,
                       .vocab_size = c.vocab_size,
                       .n_positions = c.n_positions},
                      c.num_params(), gpt2_config_json(c));
}

GPT2Config gpt2_config(const ModelConfig& cfg) {
  SNUG_CHECK(cfg.shape.model_type == "gpt2", "model '", cfg.shape.name, "' is ",
             cfg.shape.model_type, ", not gpt2");
  return parse_gpt2_config(cfg.hf, cfg.shape.name, cfg.shape.name);
}

GPT2Config resolve_gpt2(const std::string& spec, const ModelShapeOverrides& o) {
  return gpt2_config(resolve_model(spec, o));
}

}  // namespace snug

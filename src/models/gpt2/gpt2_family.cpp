// GPT-2's entry in the registry of model families (models/registry.h).
#include <type_traits>

#include "core/error.h"
#include "models/gpt2/gpt2.h"
#include "models/gpt2/gpt2_config.h"
#include "models/gpt2/gpt2_weights.h"
#include "models/registry.h"

namespace snug {

namespace {

template <class M>
auto& as_gpt2(M& m) {
  auto* g = dynamic_cast<std::conditional_t<std::is_const_v<M>, const GPT2, GPT2>*>(&m);
  SNUG_ASSERT(g != nullptr, "a gpt2 model that is not a GPT2");
  return *g;
}

ModelConfig parse(const nlohmann::json& j, const std::string& spec, const std::string& name) {
  const GPT2Config c = parse_gpt2_config(j, spec, name);
  ModelConfig m;
  m.shape.name = c.name;
  m.shape.model_type = "gpt2";
  m.shape.n_layer = c.n_layer;
  m.shape.n_embd = c.n_embd;
  m.shape.n_head = c.n_head;
  m.shape.vocab_size = c.vocab_size;
  m.shape.n_positions = c.n_positions;
  m.num_params = c.num_params();
  m.hf = gpt2_config_json(c);
  return m;
}

std::unique_ptr<Model> create(const ModelConfig& cfg, Device& dev, DType param_dtype,
                                 const std::optional<WeightQuantConfig>& quant) {
  return std::make_unique<GPT2>(gpt2_config(cfg), dev, param_dtype, quant);
}

HfLoadReport load_weights(Model& model, const std::string& path, uint64_t /*seed*/) {
  return load_gpt2_weights(as_gpt2(model), path);
}

void save_weights(const Model& model, const std::string& path,
                  const std::map<std::string, std::string>& extra) {
  save_gpt2_weights(as_gpt2(model), path, extra);
}

// Per token: 12 C^2 weights per block in its four GEMMs (c_attn 3C^2, c_proj C^2, c_fc 4C^2,
// mlp c_proj 4C^2), 2 FLOPs each; the tied head V C; causal attention 2 T C per block (QK^T
// and PV over (T+1)/2 keys on average).
FlopsPerToken flops_per_token(const ModelConfig& cfg, int64_t T) {
  const double L = static_cast<double>(cfg.shape.n_layer);
  const double C = static_cast<double>(cfg.shape.n_embd);
  const double V = static_cast<double>(cfg.shape.vocab_size);
  FlopsPerToken f;
  f.layer_gemm = 2.0 * 12.0 * L * C * C;
  f.head = 2.0 * V * C;
  f.attention = 2.0 * L * static_cast<double>(T) * C;
  return f;
}

// Korthikanti et al. 2022's per-layer count for a GPT block without dropout: s b h (16 e + 2)
// bytes, plus a s^2 b (2 e + 1) when the attention scores are kept (naive attention without
// selective recomputation).
int64_t layer_activation_bytes(const ModelConfig& cfg, int64_t s, int64_t b, int64_t e,
                               bool keep_scores) {
  const int64_t h = cfg.shape.n_embd, a = cfg.shape.n_head;
  return s * b * h * (16 * e + 2) + (keep_scores ? a * s * s * b * (2 * e + 1) : 0);
}

}  // namespace

const Architecture& gpt2_architecture() {
  static const Architecture a{"gpt2",
                              gpt2_presets(),
                              gpt2_preset_config,
                              parse,
                              "n_layer",
                              "n_embd",
                              "n_head",
                              "vocab_size",
                              "n_positions",
                              create,
                              load_weights,
                              save_weights,
                              flops_per_token,
                              layer_activation_bytes,
                              {ModelTask::causal_lm},
                              nullptr,
                              "GPT2LMHeadModel",
                              "c_attn"};
  return a;
}

}  // namespace snug

// GPT-NeoX's entry in the registry of model families (models/registry.h).
#include <type_traits>

#include "core/error.h"
#include "models/gpt_neox/gpt_neox.h"
#include "models/gpt_neox/gpt_neox_config.h"
#include "models/registry.h"

namespace snug {

namespace {

ModelConfig parse(const nlohmann::json& j, const std::string& spec, const std::string& name) {
  return gpt_neox_model_config(parse_gpt_neox_config(j, spec, name));
}

std::unique_ptr<Model> create(const ModelConfig& cfg, Device& dev, DType param_dtype,
                                 const std::optional<WeightQuantConfig>& quant) {
  return std::make_unique<GPTNeoXLM>(gpt_neox_config(cfg), dev, param_dtype, quant);
}

template <class M>
auto& as_neox(M& m) {
  auto* g = dynamic_cast<std::conditional_t<std::is_const_v<M>, const GPTNeoXLM, GPTNeoXLM>*>(&m);
  SNUG_ASSERT(g != nullptr, "a gpt_neox model that is not a GPTNeoXLM");
  return *g;
}

HfLoadReport load_weights(Model& model, const std::string& path, uint64_t /*seed*/) {
  return load_gpt_neox_weights(as_neox(model), path);
}

void save_weights(const Model& model, const std::string& path,
                  const std::map<std::string, std::string>& extra) {
  save_gpt_neox_weights(as_neox(model), path, extra);
}

// Per token, 2 FLOPs per weight of the block GEMMs: query_key_value 3H^2, dense H^2, the MLP's
// 2 H I; the head V H; causal attention 2 T H per block.
FlopsPerToken flops_per_token(const ModelConfig& cfg, int64_t T) {
  const GPTNeoXConfig c = gpt_neox_config(cfg);
  const double H = static_cast<double>(c.hidden_size), I = static_cast<double>(c.intermediate_size);
  const double L = static_cast<double>(c.num_hidden_layers);
  FlopsPerToken f;
  f.layer_gemm = 2.0 * L * (4.0 * H * H + 2.0 * H * I);
  f.head = 2.0 * static_cast<double>(c.vocab_size) * H;
  f.attention = 2.0 * L * static_cast<double>(T) * H;
  return f;
}

// One block's saved tensors per row (s b rows, e bytes per element): the two norms' inputs and
// outputs (4h; the parallel residual reads x twice but keeps it once: 3h), q, k, v and the
// attention output (4h), the MLP's pre-activation and activation (2I); no dropout masks. With
// the scores kept (naive attention): the a s^2 b probabilities.
int64_t layer_activation_bytes(const ModelConfig& cfg, int64_t s, int64_t b, int64_t e,
                               bool keep_scores) {
  const GPTNeoXConfig c = gpt_neox_config(cfg);
  const int64_t h = c.hidden_size, I = c.intermediate_size, a = c.num_attention_heads;
  const int64_t norms = c.use_parallel_residual ? 3 * h : 4 * h;
  return s * b * e * (norms + 4 * h + 2 * I) + (keep_scores ? a * s * s * b * e : 0);
}

}  // namespace

const Architecture& gpt_neox_architecture() {
  static const Architecture a{"gpt_neox",
                              gpt_neox_presets(),
                              gpt_neox_preset_config,
                              parse,
                              "num_hidden_layers",
                              "hidden_size",
                              "num_attention_heads",
                              "vocab_size",
                              "max_position_embeddings",
                              create,
                              load_weights,
                              save_weights,
                              flops_per_token,
                              layer_activation_bytes,
                              {ModelTask::causal_lm},
                              nullptr,
                              "GPTNeoXForCausalLM",
                              "query_key_value"};
  return a;
}

}  // namespace snug

// The registry entries (models/registry.h) of the Llama-shaped families: llama, mistral and
// qwen2 share everything but their config.json keys, defaults and presets.
#include <type_traits>

#include "core/error.h"
#include "io/safetensors.h"
#include "models/llama/llama.h"
#include "models/llama/llama_config.h"
#include "models/llama/llama_weights.h"
#include "models/registry.h"

namespace snug {

namespace {

template <LlamaVariant V>
ModelConfig parse(const nlohmann::json& j, const std::string& spec, const std::string& name) {
  return llama_model_config(parse_llama_config(V, j, spec, name));
}

std::unique_ptr<Model> create(const ModelConfig& cfg, Device& dev, DType param_dtype,
                                 const std::optional<WeightQuantConfig>& quant) {
  return std::make_unique<LlamaLM>(llama_config(cfg), dev, param_dtype, quant);
}

template <class M>
auto& as_llama(M& m) {
  auto* g = dynamic_cast<std::conditional_t<std::is_const_v<M>, const LlamaLM, LlamaLM>*>(&m);
  SNUG_ASSERT(g != nullptr, "a llama/mistral/qwen2 model that is not a LlamaLM");
  return *g;
}

HfLoadReport load_weights(Model& model, const std::string& path, uint64_t /*seed*/) {
  return load_llama_weights(as_llama(model), path);
}

void save_weights(const Model& model, const std::string& path,
                  const std::map<std::string, std::string>& extra) {
  save_llama_weights(as_llama(model), path, extra);
}

// Per token, 2 FLOPs per weight of the block GEMMs: q and o (H x Q each), k and v (H x K each),
// the gated MLP's three H x I matrices; the head V x H; causal attention 2 * T * Q per block
// (QK^T and PV over (T+1)/2 keys on average, Q = heads * head_dim).
FlopsPerToken flops_per_token(const ModelConfig& cfg, int64_t T) {
  const LlamaConfig c = llama_config(cfg);
  const double H = static_cast<double>(c.hidden_size), I = static_cast<double>(c.intermediate_size);
  const double Q = static_cast<double>(c.num_attention_heads * c.head_dim);
  const double K = static_cast<double>(c.num_key_value_heads * c.head_dim);
  const double L = static_cast<double>(c.num_hidden_layers);
  FlopsPerToken f;
  f.layer_gemm = 2.0 * L * (2.0 * H * Q + 2.0 * H * K + 3.0 * H * I);
  f.head = 2.0 * static_cast<double>(c.vocab_size) * H;
  f.attention = 2.0 * L * static_cast<double>(T) * Q;
  return f;
}

// One block's saved tensors for backward per row (s b rows, e bytes per element, as Korthikanti
// et al. count): the two norms' inputs and outputs (4h), q and the attention output (2Q), k and
// v (2K), gate, up and the activation's output (3I); no dropout masks. With the scores kept
// (naive attention): the a s^2 b probabilities.
int64_t layer_activation_bytes(const ModelConfig& cfg, int64_t s, int64_t b, int64_t e,
                               bool keep_scores) {
  const LlamaConfig c = llama_config(cfg);
  const int64_t h = c.hidden_size, I = c.intermediate_size;
  const int64_t Q = c.num_attention_heads * c.head_dim, K = c.num_key_value_heads * c.head_dim;
  const int64_t a = c.num_attention_heads;
  return s * b * e * (4 * h + 2 * Q + 2 * K + 3 * I) + (keep_scores ? a * s * s * b * e : 0);
}

template <LlamaVariant V>
const Architecture& entry(const char* type, const char* hf_class) {
  static const Architecture a{type,
                              llama_presets(V),
                              llama_preset_config,
                              parse<V>,
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
                              hf_class,
                              "q_proj,v_proj"};
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

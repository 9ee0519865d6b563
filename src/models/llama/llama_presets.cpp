// Presets of the llama, mistral and qwen2 families: the config.json of the Hub checkpoints (the
// keys that matter; token ids, dtype and versions are left out), and a tiny one per family with
// the byte-level vocabulary of the built-in dataset, for tests and quick runs.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "models/llama/llama_config.h"
#include "models/presets.h"

namespace snug {

namespace {

struct LlamaPreset {
  LlamaVariant variant;
  const char* name;
  const char* alias;
  const char* config;  // config.json text
};

// Llama 2 (meta-llama/Llama-2-{7,13,70}b-hf): the 7B is 6,738,415,616 parameters, the 70B
// uses 8 key/value heads. Mistral-7B-v0.1 (GQA 8, sliding_window 4096). Qwen2-0.5B (tied head)
// and Qwen2-7B.
const LlamaPreset kLlamaPresets[] = {
    {LlamaVariant::llama, "llama-tiny", "", R"({
      "vocab_size": 256, "hidden_size": 128, "intermediate_size": 352, "num_hidden_layers": 4,
      "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
      "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false})"},
    {LlamaVariant::llama, "llama-7b", "llama-2-7b", R"({
      "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
      "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
      "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
      "bos_token_id": 1, "eos_token_id": 2})"},
    {LlamaVariant::llama, "llama-13b", "llama-2-13b", R"({
      "vocab_size": 32000, "hidden_size": 5120, "intermediate_size": 13824,
      "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 40,
      "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
      "bos_token_id": 1, "eos_token_id": 2})"},
    {LlamaVariant::llama, "llama-70b", "llama-2-70b", R"({
      "vocab_size": 32000, "hidden_size": 8192, "intermediate_size": 28672,
      "num_hidden_layers": 80, "num_attention_heads": 64, "num_key_value_heads": 8,
      "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "tie_word_embeddings": false,
      "bos_token_id": 1, "eos_token_id": 2})"},
    {LlamaVariant::mistral, "mistral-tiny", "", R"({
      "vocab_size": 256, "hidden_size": 128, "intermediate_size": 448, "num_hidden_layers": 4,
      "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
      "sliding_window": 256, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
      "tie_word_embeddings": false})"},
    {LlamaVariant::mistral, "mistral-7b", "mistral-7b-v0.1", R"({
      "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
      "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
      "max_position_embeddings": 32768, "sliding_window": 4096, "rms_norm_eps": 1e-5,
      "rope_theta": 10000.0, "tie_word_embeddings": false, "bos_token_id": 1,
      "eos_token_id": 2})"},
    {LlamaVariant::qwen2, "qwen2-tiny", "", R"({
      "vocab_size": 256, "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 4,
      "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 256,
      "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": true,
      "use_sliding_window": false})"},
    {LlamaVariant::qwen2, "qwen2-0.5b", "", R"({
      "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
      "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
      "max_position_embeddings": 131072, "max_window_layers": 24, "sliding_window": 131072,
      "use_sliding_window": false, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
      "tie_word_embeddings": true, "bos_token_id": 151643, "eos_token_id": 151643})"},
    {LlamaVariant::qwen2, "qwen2-7b", "", R"({
      "vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944,
      "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
      "max_position_embeddings": 131072, "max_window_layers": 28, "sliding_window": 131072,
      "use_sliding_window": false, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
      "tie_word_embeddings": false, "bos_token_id": 151643, "eos_token_id": 151643})"},
};

}  // namespace

const std::vector<std::pair<std::string, std::string>>& llama_presets(LlamaVariant v) {
  static const auto lists = [] {
    std::vector<std::vector<std::pair<std::string, std::string>>> l(3);
    for (const LlamaPreset& p : kLlamaPresets)
      l[static_cast<size_t>(p.variant)].emplace_back(p.name, p.alias);
    return l;
  }();
  return lists[static_cast<size_t>(v)];
}

nlohmann::json llama_preset_config(const std::string& name) {
  const LlamaPreset& p = find_preset(kLlamaPresets, name, "llama/mistral/qwen2");
  nlohmann::json j = nlohmann::json::parse(p.config);
  LlamaConfig c;
  c.variant = p.variant;
  j["model_type"] = c.model_type();
  return j;
}

}  // namespace snug

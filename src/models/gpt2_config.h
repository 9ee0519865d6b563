// GPT-2 shapes: the named presets, any Hugging Face GPT-2 config.json, and closed-form counts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace snug {

struct GPT2Config {
  std::string name;
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;  // maximum context
  int64_t n_embd = 768;        // C
  int64_t n_layer = 12;        // L
  int64_t n_head = 12;         // NH
  float layer_norm_epsilon = 1e-5f;

  int64_t head_size() const { return n_embd / n_head; }
  // Parameters with the LM head tied to wte (as GPT-2): V*C + P*C + L*(12C^2 + 13C) + 2C.
  int64_t num_params() const;
  void validate() const;  // throws snug::Error for impossible shapes
};

// "gpt2-tiny", "gpt2-124m" (alias "gpt2"), "gpt2-350m" ("gpt2-medium"), "gpt2-774m"
// ("gpt2-large"), "gpt2-1.5b" ("gpt2-xl"), or a path to a Hugging Face config.json
// (keys vocab_size, n_positions, n_embd, n_layer, n_head, layer_norm_epsilon).
GPT2Config resolve_model(const std::string& name_or_path);
// The text of a Hugging Face config.json named `spec` (also the name of the result), validated;
// every problem is a snug::Error naming `spec` and the key.
GPT2Config parse_model_config(std::string_view text, const std::string& spec);
std::vector<std::string> model_preset_names();

// Shape overrides applied on top of a preset or config.json (--n-layer, --n-embd, --n-head,
// --vocab-size, --n-positions), so that any GPT-2-shaped model can be planned from flags alone,
// e.g. gpt2-124m with n_layer 32, n_embd 4096, n_head 32, n_positions 2048 is a 6.7B "7B" shape.
struct ModelShapeOverrides {
  std::optional<int64_t> vocab_size, n_positions, n_embd, n_layer, n_head;
  bool any() const { return vocab_size || n_positions || n_embd || n_layer || n_head; }
};
// resolve_model(name_or_path) with `o` applied and validated; when any override is set the name
// records them ("gpt2-124m n_layer=32 n_embd=4096 n_head=32"). Throws naming the flag for a
// non-positive value.
GPT2Config resolve_model(const std::string& name_or_path, const ModelShapeOverrides& o);

}  // namespace snug

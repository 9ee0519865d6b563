// LoRA (Hu et al. 2021, arXiv:2106.09685) as PEFT's LoraConfig sets it up: a frozen Linear
// y = x W + b gets a trainable low-rank bypass
//     y = x W + b + scaling * dropout(x) A^T B^T,      A (r, in), B (out, r)
// with scaling = alpha / r (or alpha / sqrt(r) with rsLoRA, Kalajdzievski 2023). A starts as
// kaiming_uniform(a = sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in)), B as zeros, so the adapted model
// starts exactly as the base model. Shapes and names follow PEFT so that an exported adapter
// loads there: for module M, parameters "M.lora_A.weight" (r, in) and "M.lora_B.weight"
// (out, r) - PEFT keeps nn.Linear layouts even for GPT-2's Conv1D (fan_in_fan_out).
//
// target_modules as PEFT matches a list: a module is adapted when its name equals a key or ends
// with "." + key ("c_proj" adapts both attn.c_proj and mlp.c_proj of GPT-2); "all-linear" adapts
// every Linear of the blocks (not the LM head). A key that matches nothing is an error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace snug {

struct LoraConfig {
  int64_t r = 8;         // rank (PEFT's default)
  double alpha = 8.0;    // lora_alpha (PEFT's default)
  double dropout = 0.0;  // lora_dropout on the adapter's input, training only
  std::vector<std::string> target_modules{"c_attn"};  // PEFT's default for GPT-2
  bool use_rslora = false;

  double scaling() const;
  // Throws snug::Error naming the flag (--lora-r, --lora-alpha, --lora-dropout,
  // --target-modules) for values that cannot work.
  void validate() const;
};

// "c_attn,c_proj" -> {"c_attn", "c_proj"} (spaces trimmed, empty entries rejected).
std::vector<std::string> parse_target_modules(const std::string& text);

// PEFT's rule for a list of keys: name == key or name ends with "." + key; "all-linear" matches
// every name passed here (the caller passes only Linear modules of the blocks).
bool lora_target_matches(const std::vector<std::string>& keys, const std::string& module_name);

// The key of one adapter input's dropout mask (the op table's lora_dropout, kernels/ops.inc,
// draws it from a counter-based hash of the key and the element index, so that recomputation
// under gradient checkpointing and backward see the very mask forward used, with no mask stored).
uint64_t lora_dropout_key(uint64_t seed, uint64_t forward_count, int64_t layer, int slot);

struct Parameter;

// One adapted Linear of a model: PEFT's lora_A/lora_B pair beside the frozen base weight of
// `module`. The model owns the parameters; this names them.
struct LoraAdapter {
  std::string module;  // Hugging Face module name, "transformer.h.0.attn.c_attn"
  Parameter* base;     // the frozen base weight, in the family's layout
  Parameter* A;        // (r, in)
  Parameter* B;        // (out, r)
  int64_t layer;       // the block that holds it
  int slot;            // which Linear of that block (the family numbers them)
  // The base stores its weight (in, out), as GPT-2's Conv1D, rather than nn.Linear's (out, in):
  // PEFT's fan_in_fan_out.
  bool fan_in_fan_out;
};

}  // namespace snug

// GPT-2 weights as a Hugging Face-named safetensors file: what `snug export-init` writes and
// `snug train --init-from` reads, so that another engine (PyTorch, transformers'
// GPT2LMHeadModel.load_state_dict) can start from exactly the weights snug starts from.
//
// Names and layouts are GPT2LMHeadModel's state_dict: "transformer.h.0.attn.c_attn.weight" with
// Conv1D's (in, out) layout, the LM head tied to transformer.wte.weight (so no lm_head.weight is
// written). The metadata carries the model's shape under Hugging Face config.json keys
// (vocab_size, n_positions, n_embd, n_layer, n_head, layer_norm_epsilon) plus "format": "pt",
// which transformers expects of a safetensors checkpoint.
//
// Loading is models/hf_weights.h's, strict, with GPT-2's rules for what a Hugging Face checkpoint
// legitimately adds:
//   - names without the "transformer." prefix (the original gpt2 checkpoints on the Hub);
//   - "lm_head.weight", accepted only when it equals transformer.wte.weight (snug ties them);
//   - the causal-mask buffers "*.attn.bias" / "*.attn.masked_bias" of older transformers.
// F32, F16 and BF16 tensors are accepted (converted to the parameter's dtype). Every problem is
// a snug::Error naming the file and the tensor.
#pragma once

#include <map>
#include <string>

#include "models/gpt2/gpt2.h"
#include "models/hf_weights.h"

namespace snug {

// Hugging Face config.json keys of `cfg` as strings, plus "format": "pt" and "model": cfg.name.
std::map<std::string, std::string> gpt2_weights_metadata(const GPT2Config& cfg);

// What a GPT-2 checkpoint may add to the parameters (see above).
HfWeightRules gpt2_weight_rules(const GPT2Config& cfg);

// Writes every parameter value (cpu model) under its name, in parameters() order, with
// gpt2_weights_metadata(config) merged with `extra` metadata. Atomic (see io/safetensors.h).
void save_gpt2_weights(const GPT2& model, const std::string& path,
                       const std::map<std::string, std::string>& extra = {});

// Loads `path` into the model's parameters, strictly (see above). On the meta device only the
// names and shapes are checked.
HfLoadReport load_gpt2_weights(GPT2& model, const std::string& path);

}  // namespace snug

// Any model's weights under their Hugging Face state_dict names: one safetensors file, or a
// model folder as `save_pretrained` writes it (model.safetensors, or shards listed by
// model.safetensors.index.json). Every family's weights load and save through this
// (load_model_weights, save_model_weights), with its own HfWeightRules (Architecture::
// weight_rules), so checkpoints, --init-from, PEFT merges and exports interoperate with
// transformers whatever the family.
//
// Loading is strict: every parameter must be present once with its exact shape, and nothing else
// may be there, except what the family's rules allow a Hugging Face checkpoint to add:
//   - names without an optional prefix (GPT-2's "transformer.", as the original Hub files);
//   - non-parameter buffers, by name suffix (older GPT-2 files' causal masks, rotary inv_freq);
//   - a tied head's weight (e.g. "lm_head.weight"), accepted only when it equals the tensor it is
//     tied to;
//   - a head of another task, as transformers' from_pretrained handles one: parameters under
//     `fresh_prefixes` may be absent (a bare encoder or a pre-training checkpoint loaded for
//     classification has no classifier): they keep the family's initialization from
//     `init_seed` ("newly initialized", transformers says); file tensors under `unused_prefixes`
//     (another head: BERT's next-sentence or MLM head) are dropped. Both are reported by name
//     (HfLoadReport) so that the command can say so, as transformers warns;
//   - LayerNorm "gamma"/"beta" for "weight"/"bias" (`legacy_norm_names`: the names of TF-era
//     BERT checkpoints, which transformers renames as it loads).
// F32, F16 and BF16 tensors are accepted and converted as they load into the parameter's storage
// (fp32, bf16 for --bf16-full, or quantized for --load-in-8bit/4bit), one tensor at a time and
// shard by shard: the host never holds more than one tensor in fp32 besides the model itself.
// Non-finite values are refused by name. Every problem is a snug::Error naming the file and the
// tensor. On the meta device only names and shapes are checked. A parameter partitioned at
// construction (ZeRO stage 3, Parameter::shard) is read into host staging and only the rank's slice
// is kept on the device.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "models/model.h"

namespace snug {

struct HfWeightRules {
  std::string model_desc;                     // for messages: "gpt2-tiny (GPT-2)"
  std::string optional_prefix;                // names may lack it ("transformer.")
  std::vector<std::string> ignored_suffixes;  // buffers that are not parameters
  // A tied head: a file may carry `tied_name`, only equal to `tied_to` (a parameter name).
  std::string tied_name, tied_to;
  std::string tie_note = "snug ties the LM head to the token embedding (tie_word_embeddings)";
  std::vector<std::string> fresh_prefixes;   // parameters the file may lack (a task's head)
  std::vector<std::string> unused_prefixes;  // file tensors dropped (other tasks' heads)
  uint64_t init_seed = 0;                    // initializes the model when a fresh one is absent
  bool legacy_norm_names = false;            // "LayerNorm.gamma"/".beta" read as weight/bias
};

// What a load did beyond the one-to-one case.
struct HfLoadReport {
  std::vector<std::string> initialized;  // parameters absent from the file (fresh_prefixes)
  std::vector<std::string> unused;       // file tensors dropped (unused_prefixes), as spelled
  uint64_t init_seed = 0;                // what `initialized` holds: init_weights(init_seed)
  // One line for the command's output ("" when both lists are empty): what was initialized from
  // which seed and what was dropped, with a few names of each.
  std::string describe() const;
};

// The safetensors files a weights path stands for, in load order: the file itself, or a folder's
// model.safetensors, or the shards its model.safetensors.index.json lists (each once, checked to
// hold exactly the tensors the index maps to it). Throws naming the path when there are none.
std::vector<std::string> hf_weight_files(const std::string& path);

// Loads `path` (a .safetensors file or a model folder) into `model`'s parameters (see above).
HfLoadReport load_hf_weights(Model& model, const std::string& path, const HfWeightRules& rules);

// Tensor `name` of `f` into a sliced parameter (Parameter::sliced(), ZeRO stage 3): read whole into
// host staging (outside the device's pool) in the slice's dtype, checked finite when
// `check_finite_values` (the error names the file and the tensor), and the rank's slice kept.
// Nothing is read on meta.
void read_into_slice(const SafetensorsFile& f, const std::string& name, Parameter& p,
                     bool check_finite_values);

// Writes every parameter value (cpu model; quantized weights dequantized to fp32) under its name,
// in parameters() order, with model.weights_metadata() merged with `extra`, into one safetensors
// file. Atomic (io/safetensors.h).
void save_hf_weights(const Model& model, const std::string& path,
                     const std::map<std::string, std::string>& extra = {});

}  // namespace snug

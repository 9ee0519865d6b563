// A DecoderLM's weights as a Hugging Face-named safetensors file, for the families whose file
// names are exactly their parameter names (interim: the generic Hugging Face loader,
// models/hf_weights.h, replaces it). Loading is strict: every parameter once with its shape;
// besides, only the buffers `ignored` names (suffixes, e.g. ".rotary_emb.inv_freq") and, for a
// tied head, `tied_head` equal to the embedding. F32, F16 and BF16 are converted as they load;
// quantized parameters are quantized from a host copy. Every problem names the file and tensor.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "models/decoder_lm.h"

namespace snug {

struct NamedWeightsRules {
  std::vector<std::string> ignored;  // suffixes of buffers older checkpoints carry
  std::string tied_head;  // "lm_head.weight": accepted when tied and equal to the embedding
};

void save_named_weights(const DecoderLM& model, const std::string& path,
                        const std::map<std::string, std::string>& extra);
void load_named_weights(DecoderLM& model, const std::string& path, const NamedWeightsRules& rules);

}  // namespace snug

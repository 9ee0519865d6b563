// Config overrides: config.json keys set on top of a preset or config.json before the family
// validates it, so that any configuration of any family can be planned or trained from flags.
// `--config-override KEY=VALUE` (repeatable) sets one key of the family's config.json by its
// Hugging Face name; the shape flags (--n-layer, --n-embd, --n-head, --vocab-size,
// --n-positions) are aliases that set the key the family names for them (Architecture::key_*),
// with their own flag-named range checks. Both go through apply_config_overrides, so
// `--n-layer 4` and `--config-override n_layer=4` give the same ModelConfig on GPT-2.
#pragma once

#include <string>
#include <vector>

#include "models/model_config.h"

namespace snug {

struct Architecture;

// `cfg` (resolved by `arch`) with the shape flags of `shape` and then each "KEY=VALUE" of
// `overrides` set in its config.json, re-validated by the family's parse. VALUE is read as JSON
// (4, 1e-5, true, "text", [1,2]) and otherwise as a plain string (gelu_new). Each override adds
// " key=value" to the model's name. Refused, with one snug::Error naming the flag and key: text
// without '=' or an empty key; model_type (it picks the family); a key the family's resolved
// config.json does not have; a key set twice; a value the family's parse rejects.
ModelConfig apply_config_overrides(const Architecture& arch, const ModelConfig& cfg,
                                   const ModelShapeOverrides& shape,
                                   const std::vector<std::string>& overrides);

}  // namespace snug

// --freeze: parameters that do not train. A frozen parameter gets requires_grad = false before
// the optimizer is built, so backward never allocates its gradient buffer (the model skips its
// dW work) and the optimizer keeps no state for it; its weights stay bit for bit what they were.
// This is the `param.requires_grad_(False)` loop of a PyTorch fine-tuning script, addressed by
// Hugging Face parameter names (the model's state_dict keys).
//
// A pattern with a glob character (`*`, `?`, `[...]`) must match the WHOLE name, and `*` crosses
// dots: `transformer.h.*` freezes every block, `transformer.h.[0-5].*` the first six,
// `*.ln_?.weight` the LayerNorm scales. A pattern without one matches as a substring:
// `transformer.wte` freezes `transformer.wte.weight`, `attn.c_attn` every layer's QKV projection.
// A pattern that matches no parameter is an error naming it (a typo must not silently train
// everything).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/parameter.h"

namespace snug {

// True when `name` is selected by `pattern` (rules above).
bool freeze_pattern_matches(const std::string& pattern, const std::string& name);

// Sets requires_grad = false on every parameter matched by any pattern and returns how many
// parameter tensors that froze (a parameter matched twice counts once). Throws snug::Error for
// an empty pattern or one that matches nothing, before changing any parameter.
int64_t apply_freeze(const ParameterList& params, const std::vector<std::string>& patterns);

}  // namespace snug

// A model's logits as host floats, for tests that compare them with another engine's.
#pragma once

#include <cstdint>
#include <vector>

#include "models/model.h"

namespace snug::test {

// (B,T,V) logits of an evaluation forward of `tokens` (B,T), full logits mode.
inline std::vector<float> logits_of(Model& m, const std::vector<int32_t>& tokens, int64_t B,
                                    int64_t T) {
  m.set_logits_mode(LogitsMode::full);
  m.forward(tokens.data(), nullptr, B, T, /*for_backward=*/false);
  const Tensor& l = m.logits();
  std::vector<float> out(l.data<float>(), l.data<float>() + l.numel());
  m.free_activations();
  return out;
}

}  // namespace snug::test

// The LoRA dropout mask (nn/lora.h): which input elements an adapter keeps, from a counter-based
// hash of (key, i), so that backward and recomputation see forward's mask with nothing stored.
// Shared by the fast and the reference lora_dropout: it is the mask's definition, not arithmetic.
#pragma once

#include <cstdint>

#include "core/random.h"

namespace snug::kernels {

inline bool lora_keep(uint64_t key, int64_t i, double p) {
  // 53-bit uniform in [0, 1) from the (key, i) hash.
  const uint64_t h = splitmix64_mix(key + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1));
  return static_cast<double>(h >> 11) * 0x1.0p-53 >= p;
}

}  // namespace snug::kernels

// Stochastic rounding to bf16 for --bf16-full (parameters and optimizer state stored in bf16).
//
// Why: an update smaller than half a bf16 ulp (2^-9 relative: lr * update below ~0.2% of the
// weight, the usual case late in training) is lost entirely under round-to-nearest, so bf16
// weights freeze. Rounding up with probability equal to the discarded fraction of an ulp makes
// the stored value an unbiased estimate of the exact one (E[round(x)] = x), so such updates still
// move the weights on average (Gupta et al. 2015; Zamirai et al. 2020, "Revisiting BFloat16
// Training").
//
// The random bits come from a counter-based generator: a hash of (key, element index), with the
// key a hash of (seed, optimizer step, tensor index). No generator state exists, so a run is
// bit-reproducible at any thread count and a resumed run draws exactly the bits the uninterrupted
// one would have.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/random.h"

namespace snug::kernels {

// A bijective 32-bit integer hash (Wellons' "lowbias32", bias ~0.17 of the ideal avalanche).
inline constexpr uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// The key of one tensor's rounding at one optimizer step.
inline constexpr uint64_t rounding_key(uint64_t seed, int64_t step, int64_t tensor) {
  uint64_t k = splitmix64_mix(seed ^ 0x6a09e667f3bcc909ull);
  k = splitmix64_mix(k ^ static_cast<uint64_t>(step));
  return splitmix64_mix(k ^ static_cast<uint64_t>(tensor));
}

// An independent key derived from `key` (a second stream, e.g. for the optimizer state).
inline constexpr uint64_t rounding_substream(uint64_t key, uint64_t stream) {
  return splitmix64_mix(key ^ (0x9e3779b97f4a7c15ull * (stream + 1)));
}

// 32 random bits for element i under `key`.
inline constexpr uint32_t random_bits(uint64_t key, int64_t i) {
  const auto u = static_cast<uint64_t>(i);
  const uint32_t x = hash32(static_cast<uint32_t>(u) ^ static_cast<uint32_t>(key));
  return hash32(x ^ static_cast<uint32_t>(key >> 32) ^
                (static_cast<uint32_t>(u >> 32) * 0x9e3779b9u));
}

// bf16 bits of f rounded stochastically with the low 16 bits of r: the magnitude rounds up with
// probability (discarded low 16 bits) / 2^16, else truncates. Values already in bf16 are exact;
// inf stays inf; NaN stays NaN (quieted, as f32_to_bf16). Branch-free, for vector loops.
inline uint16_t f32_to_bf16_stochastic(float f, uint32_t r) {
  const uint32_t u = f32_bits(f);
  const bool special = (u & 0x7f800000u) == 0x7f800000u;
  const uint32_t quiet = (u & 0x7fffffffu) > 0x7f800000u ? 0x40u : 0u;
  const uint32_t up = special ? 0u : (r & 0xffffu);
  return static_cast<uint16_t>(((u + up) >> 16) | quiet);
}

}  // namespace snug::kernels

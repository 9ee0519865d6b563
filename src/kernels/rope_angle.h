// Internal to the rope kernels: the rotation angle of pair j at position t, in float, computed as
// transformers computes it (inv_freq = 1 / theta^(float(2j) / R) in fp32 unless a scaled rope
// gives its own, angle = float(t) * inv_freq), so that fast and reference kernels rotate by the
// same angle; and the check of the rotary dims both make (kernels/rope_entry.inc).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace snug::kernels::detail {

inline float rope_inv_freq(int64_t j, int64_t R, float theta) {
  return 1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(R));
}

// inv_freq: the R/2 given inverse frequencies (a scaled rope), or null for theta's.
inline float rope_inv_freq(int64_t j, int64_t R, float theta, const float* inv_freq) {
  return inv_freq ? inv_freq[j] : rope_inv_freq(j, R, theta);
}

inline float rope_angle(int64_t t, int64_t j, int64_t R, float theta, const float* inv_freq) {
  return static_cast<float>(t) * rope_inv_freq(j, R, theta, inv_freq);
}

// R rotary dims of a head of hs: even (they pair up) and at most hs.
inline void check_rope_dims(int64_t R, int64_t hs) {
  SNUG_CHECK(R > 0 && R % 2 == 0 && R <= hs, "rope: rotary dims ", R,
             " must be even and within the head size ", hs);
}

}  // namespace snug::kernels::detail

// Internal to the rope kernels: the rotation angle of pair j at position t, in float, computed as
// transformers computes it (inv_freq = 1 / theta^(float(2j) / R) in fp32, angle = float(t) *
// inv_freq), so that fast and reference kernels rotate by the same angle.
#pragma once

#include <cmath>
#include <cstdint>

namespace snug::kernels::detail {

inline float rope_inv_freq(int64_t j, int64_t R, float theta) {
  return 1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(R));
}

inline float rope_angle(int64_t t, int64_t j, int64_t R, float theta) {
  return static_cast<float>(t) * rope_inv_freq(j, R, theta);
}

}  // namespace snug::kernels::detail

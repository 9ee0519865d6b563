// Internal to the kernels: branch-free float math that GCC auto-vectorizes under the default
// -ftrapping-math (no float comparisons, no libm calls, no -ffast-math needed).
#pragma once

#include <cstdint>
#include <cstring>

namespace snug::kernels::detail {

// exp(x) in float: x = n ln2 + r with |r| <= ln2/2, the Cephes expf polynomial for e^r, and
// 2^n built in the exponent field. Max error about 2 ulp for x in [-87, 88]. Below that the
// result is 0 (exact 0 where the true value would be subnormal), above about 88.4 it is +inf;
// inputs beyond |x| ~ 2^21, -inf and NaN give garbage/NaN (softmax arguments never get there).
inline float fast_exp(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;       // 1.5 * 2^23: adding it rounds to an integer
  constexpr int32_t kRoundBits = 0x4B400000;  // its bit pattern; n sits in the low bits
  const float z = x * kLog2e + kRound;
  const float n = z - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * r * r + r + 1.0f;
  // n as an integer, read from z's bits and clamped in the integer domain (integer min/max
  // vectorize; float ones do not under -ftrapping-math): -127 gives 2^n = 0, 128 gives +inf.
  int32_t zi;
  std::memcpy(&zi, &z, sizeof(zi));
  zi = zi < kRoundBits - 127 ? kRoundBits - 127 : zi;
  zi = zi > kRoundBits + 128 ? kRoundBits + 128 : zi;
  const int32_t bits = (zi - kRoundBits + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

}  // namespace snug::kernels::detail

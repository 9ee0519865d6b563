// 16-bit float conversions and the counter-based random bits in device code, bit for bit those of
// core/dtype.h (f32_to_bf16, f32_to_f16 and back) and kernels/stochastic_round.h
// (f32_to_bf16_stochastic). The hardware converters round the same way but write other NaN
// payloads, so the integer formulas are mirrored here; a change to either side must change both
// (tests/cuda/precision_cudatest.cpp compares them over every special case). The constexpr
// hashes (splitmix64_mix, hash32, random_bits) are the host's own, called from device code
// (--expt-relaxed-constexpr).
#pragma once

#include <cstdint>

#include "core/random.h"
#include "kernels/dropout_mask.h"
#include "kernels/stochastic_round.h"

namespace snug::cuda {

__device__ inline float bf16_to_f32(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

// Round to nearest even; NaN stays NaN (quieted), overflow rounds to inf.
__device__ inline uint16_t f32_to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// IEEE binary16, round to nearest even, subnormals exact, >= 65520 to inf.
__device__ inline uint16_t f32_to_f16(float f) {
  const uint32_t u = __float_as_uint(f);
  const auto sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((a >> 13) & 0x3ffu);
  if (a >= 0x477ff000u) return sign | 0x7c00u;
  if (a >= 0x38800000u) {
    const uint32_t m = a + 0xfffu + ((a >> 13) & 1u);
    return sign | static_cast<uint16_t>((m - 0x38000000u) >> 13);
  }
  if (a < 0x33000000u) return sign;
  const uint32_t exp = a >> 23;
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - exp;
  uint32_t r = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return sign | static_cast<uint16_t>(r);
}

__device__ inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (mant << 13));
  if (exp != 0) return __uint_as_float(sign | ((exp + 112) << 23) | (mant << 13));
  if (mant == 0) return __uint_as_float(sign);
  uint32_t e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return __uint_as_float(sign | (e << 23) | ((mant & 0x3ffu) << 13));
}

// The ops' `fp16` flag: IEEE binary16 when true, else bfloat16.
__device__ inline uint16_t f32_to_half(float f, bool fp16) {
  return fp16 ? f32_to_f16(f) : f32_to_bf16(f);
}
__device__ inline float half_to_f32(uint16_t h, bool fp16) {
  return fp16 ? f16_to_f32(h) : bf16_to_f32(h);
}

// kernels::f32_to_bf16_stochastic: round the magnitude up with probability (discarded low 16
// bits) / 2^16 using the low 16 bits of r; inf and NaN as f32_to_bf16.
__device__ inline uint16_t f32_to_bf16_stochastic(float f, uint32_t r) {
  const uint32_t u = __float_as_uint(f);
  const bool special = (u & 0x7f800000u) == 0x7f800000u;
  const uint32_t quiet = (u & 0x7fffffffu) > 0x7f800000u ? 0x40u : 0u;
  const uint32_t up = special ? 0u : (r & 0xffffu);
  return static_cast<uint16_t>(((u + up) >> 16) | quiet);
}

using kernels::dropout_keep;  // kernels/dropout_mask.h, called from device code

}  // namespace snug::cuda

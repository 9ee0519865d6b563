#include "core/quant_inner.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace snug::quant {

namespace {

typedef float F16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));
typedef int32_t I8 __attribute__((vector_size(32)));
typedef uint8_t U8 __attribute__((vector_size(8)));

// The full-block scaling and clamp of one value, as written in the definition.
float scaled(float v, float inv) {
  const float s = v * inv;
  return std::min(1.0f, std::max(-1.0f, s));
}

uint32_t bucket15(const float* bounds, float v) {
  uint32_t c = 0;
  for (int k = 0; k < 15; ++k) c += bounds[k] < v ? 1u : 0u;
  return c;
}

}  // namespace

float fast::block_absmax(const float* x, int64_t n) {
  // For finite floats the order of |x| is that of the integers |x|'s bits, and the largest is
  // exact however it is found, so the lanes' integer maxima equal the scalar float maximum.
  I16 m = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    I16 b;
    std::memcpy(&b, x + i, sizeof(b));
    b &= 0x7fffffff;
    m = b > m ? b : m;
  }
  int32_t r = 0;
  for (int j = 0; j < 16; ++j) r = std::max(r, m[j]);
  float out;
  std::memcpy(&out, &r, sizeof(out));
  for (; i < n; ++i) out = std::max(out, std::fabs(x[i]));
  return out;
}

void fast::encode_block4(const float* x, int64_t n, float inv, const float* bounds,
                         uint8_t* packed) {
  // (No helper returns a vector: a 64-byte return value changes the ABI without AVX-512.)
  const F16 minus_one = F16{} - 1.0f, one = F16{} + 1.0f;
  F16 bound[15];
  for (int k = 0; k < 15; ++k) bound[k] = F16{} + bounds[k];
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    F16 v;
    std::memcpy(&v, x + i, sizeof(v));
    // std::max(-1, s) is (-1 < s ? s : -1) and std::min(1, t) is (t < 1 ? t : 1): the same
    // selections, lane by lane.
    F16 s = v * inv;
    s = minus_one < s ? s : minus_one;
    s = s < one ? s : one;
    I16 c = {};
    for (int k = 0; k < 15; ++k) c -= bound[k] < s;  // true is -1
    // Even elements to the high nibbles, odd ones to the low.
    const I8 hi = __builtin_shufflevector(c, c, 0, 2, 4, 6, 8, 10, 12, 14);
    const I8 lo = __builtin_shufflevector(c, c, 1, 3, 5, 7, 9, 11, 13, 15);
    const U8 bytes = __builtin_convertvector((hi << 4) | lo, U8);
    std::memcpy(packed + i / 2, &bytes, sizeof(bytes));
  }
  for (; i < n; i += 2)
    packed[i / 2] = static_cast<uint8_t>((bucket15(bounds, scaled(x[i], inv)) << 4) |
                                         bucket15(bounds, scaled(x[i + 1], inv)));
}

float ref::block_absmax(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));
  return m;
}

void ref::encode_block4(const float* x, int64_t n, float inv, const float* bounds,
                        uint8_t* packed) {
  for (int64_t i = 0; i < n; i += 2) {
    const uint32_t hi = bucket15(bounds, scaled(x[i], inv));
    const uint32_t lo = bucket15(bounds, scaled(x[i + 1], inv));
    packed[i / 2] = static_cast<uint8_t>((hi << 4) | lo);
  }
}

uint32_t ref::count_below(const float* sorted, size_t n, float v) {
  return static_cast<uint32_t>(std::lower_bound(sorted, sorted + n, v) - sorted);
}

}  // namespace snug::quant

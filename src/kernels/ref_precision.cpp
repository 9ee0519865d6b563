// Reference 16-bit rounding and packing: the scalar converters of core/dtype.h, one at a time.
#include "core/dtype.h"
#include "kernels/kernels.h"

namespace snug::ref {

void round_to_half(float* x, int64_t n, bool fp16) {
  for (int64_t i = 0; i < n; ++i)
    x[i] = fp16 ? f16_to_f32(f32_to_f16(x[i])) : bf16_to_f32(f32_to_bf16(x[i]));
}

void copy_round_half(float* dst, const float* src, int64_t n, bool fp16) {
  for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  round_to_half(dst, n, fp16);
}

void add_bias_round_half(float* x, const float* b, int64_t N, int64_t C, bool fp16) {
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < C; ++j) {
      float& v = x[i * C + j];
      if (b) v += b[j];
      v = fp16 ? f16_to_f32(f32_to_f16(v)) : bf16_to_f32(f32_to_bf16(v));
    }
}

void pack_half(uint16_t* dst, const float* src, int64_t n, bool fp16) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16 ? f32_to_f16(src[i]) : f32_to_bf16(src[i]);
}

void unpack_half(float* dst, const uint16_t* src, int64_t n, bool fp16) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16 ? f16_to_f32(src[i]) : bf16_to_f32(src[i]);
}

}  // namespace snug::ref

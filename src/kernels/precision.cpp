// 16-bit rounding and packing for mixed precision: core/dtype.h's bulk converters (F16C or
// AVX-512 where the build has them) over OpenMP-parallel chunks small enough to stay in L1.
#include <algorithm>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace snug::kernels {

namespace {
constexpr int64_t kChunk = 4096;  // elements per unit of work (16 KiB of fp32)
inline DType half_type(bool fp16) {
  return fp16 ? DType::f16 : DType::bf16;
}

// dst[0, len) = float(half(src[0, len))), len <= kChunk, through a buffer that stays in L1.
inline void round_chunk(float* dst, const float* src, size_t len, DType h) {
  uint16_t buf[kChunk];
  convert(src, DType::f32, buf, h, len);
  convert(buf, h, dst, DType::f32, len);
}

}  // namespace

void round_to_half(float* x, int64_t n, bool fp16) {
  copy_round_half(x, x, n, fp16);
}

void copy_round_half(float* dst, const float* src, int64_t n, bool fp16) {
  const DType h = half_type(fp16);
#pragma omp parallel for schedule(static) if (n > 8 * kChunk)
  for (int64_t c = 0; c < n; c += kChunk)
    round_chunk(dst + c, src + c, static_cast<size_t>(std::min(kChunk, n - c)), h);
}

void add_bias_round_half(float* x, const float* b, int64_t N, int64_t C, bool fp16) {
  if (b == nullptr) return copy_round_half(x, x, N * C, fp16);
  const DType h = half_type(fp16);
  // Row by row, each in L1-sized pieces: the bias is added to a piece just before it is rounded.
#pragma omp parallel for schedule(static) if (N * C > 8 * kChunk)
  for (int64_t i = 0; i < N; ++i) {
    float* row = x + i * C;
    for (int64_t c = 0; c < C; c += kChunk) {
      const int64_t len = std::min(kChunk, C - c);
#pragma omp simd
      for (int64_t j = 0; j < len; ++j) row[c + j] += b[c + j];
      round_chunk(row + c, row + c, static_cast<size_t>(len), h);
    }
  }
}

void pack_half(uint16_t* dst, const float* src, int64_t n, bool fp16) {
  const DType h = half_type(fp16);
#pragma omp parallel for schedule(static) if (n > 8 * kChunk)
  for (int64_t c = 0; c < n; c += kChunk)
    convert(src + c, DType::f32, dst + c, h, static_cast<size_t>(std::min(kChunk, n - c)));
}

void unpack_half(float* dst, const uint16_t* src, int64_t n, bool fp16) {
  const DType h = half_type(fp16);
#pragma omp parallel for schedule(static) if (n > 8 * kChunk)
  for (int64_t c = 0; c < n; c += kChunk)
    convert(src + c, h, dst + c, DType::f32, static_cast<size_t>(std::min(kChunk, n - c)));
}

}  // namespace snug::kernels

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
}  // namespace

void round_to_half(float* x, int64_t n, bool fp16) {
  const DType h = half_type(fp16);
#pragma omp parallel for schedule(static) if (n > 8 * kChunk)
  for (int64_t c = 0; c < n; c += kChunk) {
    uint16_t buf[kChunk];
    const auto len = static_cast<size_t>(std::min(kChunk, n - c));
    convert(x + c, DType::f32, buf, h, len);
    convert(buf, h, x + c, DType::f32, len);
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

// Fused-projection layouts: GPT-NeoX's per-head interleaved [q_h|k_h|v_h] to and from separate
// q, k, v. Rows in parallel; each head's three slices are contiguous copies.
#include <algorithm>

#include "kernels/kernels.h"

namespace snug::kernels {

void qkv_interleaved_split(float* q, float* k, float* v, const float* qkv, int64_t N, int64_t NH,
                           int64_t hs) {
  const int64_t w = NH * hs;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* src = qkv + n * 3 * w;
    for (int64_t h = 0; h < NH; ++h, src += 3 * hs) {
      std::copy_n(src, hs, q + n * w + h * hs);
      std::copy_n(src + hs, hs, k + n * w + h * hs);
      std::copy_n(src + 2 * hs, hs, v + n * w + h * hs);
    }
  }
}

void qkv_interleaved_merge(float* dqkv, const float* dq, const float* dk, const float* dv,
                           int64_t N, int64_t NH, int64_t hs) {
  const int64_t w = NH * hs;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* dst = dqkv + n * 3 * w;
    for (int64_t h = 0; h < NH; ++h, dst += 3 * hs) {
      std::copy_n(dq + n * w + h * hs, hs, dst);
      std::copy_n(dk + n * w + h * hs, hs, dst + hs);
      std::copy_n(dv + n * w + h * hs, hs, dst + 2 * hs);
    }
  }
}

}  // namespace snug::kernels

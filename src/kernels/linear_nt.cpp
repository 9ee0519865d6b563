// Linear in nn.Linear layout (weight (out, in)) on top of gemm_f32: the layout of every family
// but GPT-2 (whose Conv1D layout is linear.cpp).
#include <algorithm>

#include "kernels/kernels.h"

namespace snug::kernels {

void linear_nt_forward(float* out, const float* inp, const float* w, const float* b, int64_t N,
                       int64_t IC, int64_t OC) {
  gemm_f32(false, true, N, OC, IC, 1.0f, inp, IC, w, IC, 0.0f, out, OC);
  if (!b) return;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* o = out + n * OC;
#pragma omp simd
    for (int64_t j = 0; j < OC; ++j) o[j] += b[j];
  }
}

void linear_nt_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, int64_t N, int64_t IC, int64_t OC, bool accumulate_dinp) {
  if (dinp)
    gemm_f32(false, false, N, IC, OC, 1.0f, dout, OC, w, IC, accumulate_dinp ? 1.0f : 0.0f, dinp,
             IC);
  if (dw) gemm_f32(true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dw, IC);
  if (db) {
    // Column sums over blocks of columns: deterministic, no reduction across threads.
    constexpr int64_t kCols = 64;
    const int64_t nblocks = (OC + kCols - 1) / kCols;
#pragma omp parallel for schedule(static)
    for (int64_t blk = 0; blk < nblocks; ++blk) {
      const int64_t o0 = blk * kCols;
      const int64_t width = std::min(kCols, OC - o0);
      double acc[kCols] = {};
      for (int64_t n = 0; n < N; ++n) {
        const float* d = dout + n * OC + o0;
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) acc[j] += d[j];
      }
      for (int64_t j = 0; j < width; ++j) db[o0 + j] += static_cast<float>(acc[j]);
    }
  }
}

}  // namespace snug::kernels

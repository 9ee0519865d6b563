// RMSNorm: rows in parallel; dw in a second pass over column blocks (no cross-thread reduction,
// deterministic), as layernorm.cpp.
//   y_c = w_c * (x_c * r),  r = (mean(x^2) + eps)^-1/2
//   dx_c = r * w_c g_c - x_c * r^3 / C * sum_i(w_i g_i x_i);  dw_c = sum_n g_c x_c r.
#include <cmath>

#include "kernels/kernels.h"
#include "kernels/lane_sum.h"
#include "kernels/parallel_loops.h"

namespace snug::kernels {

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int64_t N,
                     int64_t C, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const float ss = detail::lane_sum(C, [&](int64_t c) { return x[c] * x[c]; });
    const float r = 1.0f / std::sqrt(ss / static_cast<float>(C) + eps);
    float* o = out + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c] = w[c] * (x[c] * r);
    rstd[n] = r;
  }
}

void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                      const float* rstd, int64_t N, int64_t C) {
  if (dinp) {
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* x = inp + n * C;
      const float* d = dout + n * C;
      const float r = rstd[n];
      const float dot =  // sum_c w_c g_c x_c
          detail::lane_sum(C, [&](int64_t c) { return w[c] * d[c] * x[c]; });
      const float k = r * r * r * dot / static_cast<float>(C);
      float* g = dinp + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) g[c] += r * w[c] * d[c] - x[c] * k;
    }
  }
  if (dw) {
    detail::for_column_blocks(C, [&](int64_t c0, int64_t width) {
      double acc[detail::kColumnBlock] = {};
      for (int64_t n = 0; n < N; ++n) {
        const float* x = inp + n * C + c0;
        const float* d = dout + n * C + c0;
        const float r = rstd[n];
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) acc[j] += d[j] * (x[j] * r);
      }
      for (int64_t j = 0; j < width; ++j) dw[c0 + j] += static_cast<float>(acc[j]);
    });
  }
}

}  // namespace snug::kernels

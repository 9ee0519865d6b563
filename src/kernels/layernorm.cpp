// Layer normalization: rows in parallel; dw/db in a second pass over column blocks so that the
// parameter gradients need no cross-thread reduction (deterministic, no scratch).
#include <cmath>

#include "kernels/kernels.h"
#include "kernels/lane_sum.h"
#include "kernels/parallel_loops.h"

namespace snug::kernels {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int64_t N, int64_t C, float eps) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const float m = detail::lane_sum(C, [&](int64_t c) { return x[c]; }) / static_cast<float>(C);
    const float var = detail::lane_sum(C, [&](int64_t c) { return (x[c] - m) * (x[c] - m); }) /
                      static_cast<float>(C);
    const float s = 1.0f / std::sqrt(var + eps);
    float* o = out + n * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c] = (x[c] - m) * s * w[c] + b[c];
    mean[n] = m;
    rstd[n] = s;
  }
}

void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int64_t N,
                        int64_t C) {
  if (dinp) {
#pragma omp parallel for schedule(static)
    for (int64_t n = 0; n < N; ++n) {
      const float* x = inp + n * C;
      const float* d = dout + n * C;
      const float m = mean[n];
      const float s = rstd[n];
      const float sum_dnorm = detail::lane_sum(C, [&](int64_t c) { return d[c] * w[c]; });
      const float sum_dnorm_xhat =
          detail::lane_sum(C, [&](int64_t c) { return d[c] * w[c] * ((x[c] - m) * s); });
      const float mean_dnorm = sum_dnorm / static_cast<float>(C);
      const float mean_dnorm_xhat = sum_dnorm_xhat / static_cast<float>(C);
      float* g = dinp + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c) {
        const float xhat = (x[c] - m) * s;
        g[c] += s * (d[c] * w[c] - mean_dnorm - xhat * mean_dnorm_xhat);
      }
    }
  }
  if (dw || db) {
    detail::for_column_blocks(C, [&](int64_t c0, int64_t width) {
      double acc_w[detail::kColumnBlock] = {};
      double acc_b[detail::kColumnBlock] = {};
      for (int64_t n = 0; n < N; ++n) {
        const float* x = inp + n * C + c0;
        const float* d = dout + n * C + c0;
        const float m = mean[n];
        const float s = rstd[n];
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) {
          acc_w[j] += d[j] * ((x[j] - m) * s);
          acc_b[j] += d[j];
        }
      }
      for (int64_t j = 0; j < width; ++j) {
        if (dw) dw[c0 + j] += static_cast<float>(acc_w[j]);
        if (db) db[c0 + j] += static_cast<float>(acc_b[j]);
      }
    });
  }
}

}  // namespace snug::kernels

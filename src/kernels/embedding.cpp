// Token + position embedding. idx values must lie in [0, V) and T in [0, maxT): the caller checks.
#include <algorithm>

#include "kernels/kernels.h"
#include "kernels/parallel_loops.h"

namespace snug::kernels {

void embedding_forward(float* out, const int32_t* idx, const float* wte, const float* wpe,
                       int64_t B, int64_t T, int64_t C) {
  if (!wpe) {  // token embedding only (rotary models)
#pragma omp parallel for schedule(static)
    for (int64_t bt = 0; bt < B * T; ++bt)
      std::copy_n(wte + static_cast<int64_t>(idx[bt]) * C, C, out + bt * C);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const int64_t t = bt % T;
    float* o = out + bt * C;
    const float* te = wte + static_cast<int64_t>(idx[bt]) * C;
    const float* pe = wpe + t * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c) o[c] = te[c] + pe[c];
  }
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* idx, int64_t B,
                        int64_t T, int64_t C) {
  if (dwte) {
    // Repeated tokens hit the same dwte row, so threads split the channels instead of the
    // positions: each thread owns a column slice of every row (no races, deterministic order).
    detail::for_column_blocks(C, [&](int64_t c0, int64_t width) {
      for (int64_t bt = 0; bt < B * T; ++bt) {
        float* g = dwte + static_cast<int64_t>(idx[bt]) * C + c0;
        const float* d = dout + bt * C + c0;
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) g[j] += d[j];
      }
    });
  }
  if (dwpe) {
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < T; ++t) {
      float* g = dwpe + t * C;
      for (int64_t b = 0; b < B; ++b) {
        const float* d = dout + (b * T + t) * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) g[c] += d[c];
      }
    }
  }
}

}  // namespace snug::kernels

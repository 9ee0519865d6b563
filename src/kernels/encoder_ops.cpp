// Fast encoder ops (kernels/ops.inc, "Encoder ops"): dropout with a uint8 mask, tanh, row bias.
#include <cmath>

#include "kernels/dropout_mask.h"
#include "kernels/kernels.h"

namespace snug::kernels {

void dropout_forward(float* out, uint8_t* mask, const float* in, int64_t n, double p,
                     uint64_t key) {
  const float inv = static_cast<float>(1.0 / (1.0 - p));
#pragma omp parallel for schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = dropout_keep(key, i, p);
    if (mask) mask[i] = keep ? 1 : 0;
    out[i] = keep ? in[i] * inv : 0.0f;
  }
}

void dropout_backward(float* din, const float* dout, const uint8_t* mask, int64_t n, double p) {
  const float inv = static_cast<float>(1.0 / (1.0 - p));
#pragma omp parallel for simd schedule(static) if (n > (1 << 16))
  for (int64_t i = 0; i < n; ++i) din[i] = mask[i] ? dout[i] * inv : 0.0f;
}

void tanh_forward(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::tanh(in[i]);
}

void tanh_backward(float* din, const float* out, const float* dout, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) din[i] = (1.0f - out[i] * out[i]) * dout[i];
}

void add_bias_rows(float* x, const float* b, int64_t N, int64_t C) {
#pragma omp parallel for schedule(static) if (N * C > (1 << 16))
  for (int64_t r = 0; r < N; ++r) {
    float* row = x + r * C;
#pragma omp simd
    for (int64_t j = 0; j < C; ++j) row[j] += b[j];
  }
}

void bias_grad_rows(float* db, const float* dy, int64_t N, int64_t C) {
  // Columns split across threads; each column summed over the rows in row order.
#pragma omp parallel for schedule(static) if (N * C > (1 << 16))
  for (int64_t j0 = 0; j0 < C; j0 += 256) {
    const int64_t j1 = j0 + 256 < C ? j0 + 256 : C;
    for (int64_t r = 0; r < N; ++r) {
      const float* row = dy + r * C;
#pragma omp simd
      for (int64_t j = j0; j < j1; ++j) db[j] += row[j];
    }
  }
}

}  // namespace snug::kernels

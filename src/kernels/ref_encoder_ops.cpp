// Reference encoder ops (kernels/ops.inc, "Encoder ops"): plain loops, double where it sums.
#include <cmath>
#include <vector>

#include "kernels/dropout_mask.h"
#include "kernels/kernels.h"

namespace snug::ref {

void dropout_forward(float* out, uint8_t* mask, const float* in, int64_t n, double p,
                     uint64_t key) {
  for (int64_t i = 0; i < n; ++i) {
    const bool keep = kernels::dropout_keep(key, i, p);
    if (mask) mask[i] = keep ? 1 : 0;
    out[i] = keep ? in[i] * static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  }
}

void dropout_backward(float* din, const float* dout, const uint8_t* mask, int64_t n, double p) {
  for (int64_t i = 0; i < n; ++i)
    din[i] = mask[i] != 0 ? dout[i] * static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
}

void tanh_forward(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = static_cast<float>(std::tanh(static_cast<double>(in[i])));
}

void tanh_backward(float* din, const float* out, const float* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double y = out[i];
    din[i] = static_cast<float>((1.0 - y * y) * dout[i]);
  }
}

void add_bias_rows(float* x, const float* b, int64_t N, int64_t C) {
  for (int64_t r = 0; r < N; ++r)
    for (int64_t j = 0; j < C; ++j) x[r * C + j] += b[j];
}

void bias_grad_rows(float* db, const float* dy, int64_t N, int64_t C) {
  for (int64_t j = 0; j < C; ++j) {
    double acc = 0.0;
    for (int64_t r = 0; r < N; ++r) acc += dy[r * C + j];
    db[j] = static_cast<float>(db[j] + acc);
  }
}

}  // namespace snug::ref

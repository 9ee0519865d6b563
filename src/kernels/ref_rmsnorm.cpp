// Reference RMSNorm: plain loops in double.
#include <cmath>

#include "kernels/kernels.h"

namespace snug::ref {

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int64_t N,
                     int64_t C, float eps) {
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    double ss = 0.0;
    for (int64_t c = 0; c < C; ++c) ss += static_cast<double>(x[c]) * x[c];
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(C) + eps);
    for (int64_t c = 0; c < C; ++c) out[n * C + c] = static_cast<float>(w[c] * (x[c] * r));
    rstd[n] = static_cast<float>(r);
  }
}

void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                      const float* rstd, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const float* d = dout + n * C;
    const double r = rstd[n];
    double dot = 0.0;
    for (int64_t c = 0; c < C; ++c) dot += static_cast<double>(w[c]) * d[c] * x[c];
    for (int64_t c = 0; c < C; ++c) {
      if (dinp) dinp[n * C + c] += static_cast<float>(r * w[c] * d[c] - x[c] * r * r * r * dot / C);
    }
  }
  if (dw)
    for (int64_t c = 0; c < C; ++c) {
      double acc = 0.0;
      for (int64_t n = 0; n < N; ++n)
        acc += static_cast<double>(dout[n * C + c]) * inp[n * C + c] * rstd[n];
      dw[c] += static_cast<float>(acc);
    }
}

}  // namespace snug::ref

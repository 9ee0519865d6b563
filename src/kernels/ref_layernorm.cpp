// Reference layer normalization, statistics in double.
#include <cmath>

#include "kernels/kernels.h"

namespace snug::ref {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int64_t N, int64_t C, float eps) {
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    double m = 0.0;
    for (int64_t c = 0; c < C; ++c) m += x[c];
    m /= static_cast<double>(C);
    double var = 0.0;
    for (int64_t c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m);
    var /= static_cast<double>(C);
    const double s = 1.0 / std::sqrt(var + eps);
    for (int64_t c = 0; c < C; ++c)
      out[n * C + c] = static_cast<float>((x[c] - m) * s * w[c] + b[c]);
    mean[n] = static_cast<float>(m);
    rstd[n] = static_cast<float>(s);
  }
}

void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int64_t N,
                        int64_t C) {
  for (int64_t n = 0; n < N; ++n) {
    const float* x = inp + n * C;
    const float* d = dout + n * C;
    const double m = mean[n];
    const double s = rstd[n];
    // dnorm = dout * w; dx = s * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)).
    double mean_dnorm = 0.0;
    double mean_dnorm_xhat = 0.0;
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (x[c] - m) * s;
      const double dnorm = static_cast<double>(d[c]) * w[c];
      mean_dnorm += dnorm;
      mean_dnorm_xhat += dnorm * xhat;
    }
    mean_dnorm /= static_cast<double>(C);
    mean_dnorm_xhat /= static_cast<double>(C);
    for (int64_t c = 0; c < C; ++c) {
      const double xhat = (x[c] - m) * s;
      const double dnorm = static_cast<double>(d[c]) * w[c];
      if (dinp)
        dinp[n * C + c] += static_cast<float>(s * (dnorm - mean_dnorm - xhat * mean_dnorm_xhat));
      if (dw) dw[c] += static_cast<float>(d[c] * xhat);
      if (db) db[c] += d[c];
    }
  }
}

}  // namespace snug::ref

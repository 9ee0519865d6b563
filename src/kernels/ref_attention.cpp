// Reference causal multi-head self-attention: the textbook loops, double accumulation.
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/kernels.h"

namespace snug::ref {

void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C,
                       int64_t NH) {
  SNUG_CHECK(NH > 0 && C % NH == 0, "attention: C=", C, " is not a multiple of NH=", NH);
  const int64_t hs = C / NH;
  const int64_t C3 = 3 * C;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> row(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      float* a = att + (b * NH + h) * T * T;
      for (int64_t t = 0; t < T; ++t) {
        const float* q = qkv + (b * T + t) * C3 + h * hs;
        double maxv = -INFINITY;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const float* k = qkv + (b * T + t2) * C3 + C + h * hs;
          double dot = 0.0;
          for (int64_t i = 0; i < hs; ++i) dot += static_cast<double>(q[i]) * k[i];
          row[t2] = dot * scale;
          if (row[t2] > maxv) maxv = row[t2];
        }
        double sum = 0.0;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          row[t2] = std::exp(row[t2] - maxv);
          sum += row[t2];
        }
        for (int64_t t2 = 0; t2 < T; ++t2)
          a[t * T + t2] = t2 <= t ? static_cast<float>(row[t2] / sum) : 0.0f;
        float* o = out + (b * T + t) * C + h * hs;
        for (int64_t i = 0; i < hs; ++i) {
          double acc = 0.0;
          for (int64_t t2 = 0; t2 <= t; ++t2)
            acc += (row[t2] / sum) * qkv[(b * T + t2) * C3 + 2 * C + h * hs + i];
          o[i] = static_cast<float>(acc);
        }
      }
    }
  }
}

// Leaves att intact (the contract allows the fast version to destroy it).
void attention_backward(float* dqkv, const float* dout, const float* qkv, float* att, int64_t B,
                        int64_t T, int64_t C, int64_t NH) {
  SNUG_CHECK(NH > 0 && C % NH == 0, "attention: C=", C, " is not a multiple of NH=", NH);
  const int64_t hs = C / NH;
  const int64_t C3 = 3 * C;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> grad(static_cast<size_t>(B * T * C3), 0.0);
  std::vector<double> datt(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      const float* a = att + (b * NH + h) * T * T;
      for (int64_t t = 0; t < T; ++t) {
        const float* d = dout + (b * T + t) * C + h * hs;
        // out[t] = sum_t2 a[t,t2] v[t2]  ->  datt[t2] = d . v[t2], dv[t2] += a[t,t2] d.
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv + (b * T + t2) * C3 + 2 * C + h * hs;
          double* dv = grad.data() + (b * T + t2) * C3 + 2 * C + h * hs;
          double dot = 0.0;
          for (int64_t i = 0; i < hs; ++i) {
            dot += static_cast<double>(d[i]) * v[i];
            dv[i] += static_cast<double>(a[t * T + t2]) * d[i];
          }
          datt[t2] = dot;
        }
        // Softmax backward: dpre = a * (datt - sum(a * datt)).
        double s = 0.0;
        for (int64_t t2 = 0; t2 <= t; ++t2) s += a[t * T + t2] * datt[t2];
        const float* q = qkv + (b * T + t) * C3 + h * hs;
        double* dq = grad.data() + (b * T + t) * C3 + h * hs;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const double dpre = a[t * T + t2] * (datt[t2] - s) * scale;
          const float* k = qkv + (b * T + t2) * C3 + C + h * hs;
          double* dk = grad.data() + (b * T + t2) * C3 + C + h * hs;
          for (int64_t i = 0; i < hs; ++i) {
            dq[i] += dpre * k[i];
            dk[i] += dpre * q[i];
          }
        }
      }
    }
  }
  for (size_t i = 0; i < grad.size(); ++i) dqkv[i] = static_cast<float>(grad[i]);
}

}  // namespace snug::ref

// Reference memory-efficient causal attention: the textbook loops in double, with the same
// contract as the fast version (the forward saves lse, the backward recomputes the
// probabilities from q, k and lse and uses D = rowsum(dout * out)).
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/flash_attention.h"

namespace snug::ref {

void flash_attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T,
                             int64_t C, int64_t NH) {
  SNUG_CHECK(NH > 0 && C % NH == 0, "flash_attention: C=", C, " is not a multiple of NH=", NH);
  const int64_t hs = C / NH;
  const int64_t C3 = 3 * C;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> row(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
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
        lse[(b * NH + h) * T + t] = static_cast<float>(maxv + std::log(sum));
        float* o = out + (b * T + t) * C + h * hs;
        for (int64_t i = 0; i < hs; ++i) {
          double acc = 0.0;
          for (int64_t t2 = 0; t2 <= t; ++t2)
            acc += row[t2] * qkv[(b * T + t2) * C3 + 2 * C + h * hs + i];
          o[i] = static_cast<float>(acc / sum);
        }
      }
    }
  }
}

void flash_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                              const float* lse, int64_t B, int64_t T, int64_t C, int64_t NH) {
  SNUG_CHECK(NH > 0 && C % NH == 0, "flash_attention: C=", C, " is not a multiple of NH=", NH);
  const int64_t hs = C / NH;
  const int64_t C3 = 3 * C;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> grad(static_cast<size_t>(B * T * C3), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      for (int64_t t = 0; t < T; ++t) {
        const float* q = qkv + (b * T + t) * C3 + h * hs;
        const float* d = dout + (b * T + t) * C + h * hs;
        const float* o = out + (b * T + t) * C + h * hs;
        const double l = lse[(b * NH + h) * T + t];
        // D = sum_t2 p[t2] (d . v[t2]) = d . out[t].
        double D = 0.0;
        for (int64_t i = 0; i < hs; ++i) D += static_cast<double>(d[i]) * o[i];
        double* dq = grad.data() + (b * T + t) * C3 + h * hs;
        for (int64_t t2 = 0; t2 <= t; ++t2) {
          const float* k = qkv + (b * T + t2) * C3 + C + h * hs;
          const float* v = k + C;
          double* dk = grad.data() + (b * T + t2) * C3 + C + h * hs;
          double* dv = dk + C;
          double s = 0.0, dp = 0.0;
          for (int64_t i = 0; i < hs; ++i) {
            s += static_cast<double>(q[i]) * k[i];
            dp += static_cast<double>(d[i]) * v[i];
          }
          const double p = std::exp(s * scale - l);
          const double ds = p * (dp - D) * scale;  // gradient of the unscaled score q . k
          for (int64_t i = 0; i < hs; ++i) {
            dv[i] += p * d[i];
            dq[i] += ds * k[i];
            dk[i] += ds * q[i];
          }
        }
      }
    }
  }
  for (size_t i = 0; i < grad.size(); ++i) dqkv[i] = static_cast<float>(grad[i]);
}

}  // namespace snug::ref

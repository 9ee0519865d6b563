// Reference memory-efficient attention: the textbook loops in double, with the same contract as
// the fast version (the forward saves lse, the backward recomputes the probabilities from q, k and
// lse and uses D = rowsum(dout * out)); general form: strided q, k, v, GQA, causal or not.
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/flash_attention.h"
#include "kernels/ref_attention_grads.h"

namespace snug::ref {

void flash_attention_forward_gqa(float* out, float* lse, const float* q, const float* k,
                                 const float* v, const AttentionDims& d) {
  check_attention_dims(d, "flash_attention");
  const int64_t B = d.B, T = d.T, NH = d.NH, hs = d.hs, rep = d.NH / d.NKV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> row(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t kh = h / rep;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t n = d.causal ? t + 1 : T;
        const float* qr = q + (b * T + t) * d.ldq + h * hs;
        double maxv = -INFINITY;
        for (int64_t t2 = 0; t2 < n; ++t2) {
          const float* kr = k + (b * T + t2) * d.ldk + kh * hs;
          double dot = 0.0;
          for (int64_t i = 0; i < hs; ++i) dot += static_cast<double>(qr[i]) * kr[i];
          row[t2] = dot * scale;
          if (row[t2] > maxv) maxv = row[t2];
        }
        double sum = 0.0;
        for (int64_t t2 = 0; t2 < n; ++t2) {
          row[t2] = std::exp(row[t2] - maxv);
          sum += row[t2];
        }
        lse[(b * NH + h) * T + t] = static_cast<float>(maxv + std::log(sum));
        float* o = out + (b * T + t) * d.ldo + h * hs;
        for (int64_t i = 0; i < hs; ++i) {
          double acc = 0.0;
          for (int64_t t2 = 0; t2 < n; ++t2) acc += row[t2] * v[(b * T + t2) * d.ldv + kh * hs + i];
          o[i] = static_cast<float>(acc / sum);
        }
      }
    }
  }
}

void flash_attention_backward_gqa(float* dq, float* dk, float* dv, const float* dout,
                                  const float* q, const float* k, const float* v, const float* out,
                                  const float* lse, const AttentionDims& d) {
  check_attention_dims(d, "flash_attention");
  const int64_t B = d.B, T = d.T, NH = d.NH, NKV = d.NKV, hs = d.hs, rep = NH / NKV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  detail::AttentionGrads g(d);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t kh = h / rep;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t n = d.causal ? t + 1 : T;
        const float* qr = q + (b * T + t) * d.ldq + h * hs;
        const float* dd = dout + (b * T + t) * d.ldo + h * hs;
        const float* o = out + (b * T + t) * d.ldo + h * hs;
        const double l = lse[(b * NH + h) * T + t];
        // D = sum_t2 p[t2] (d . v[t2]) = d . out[t].
        double D = 0.0;
        for (int64_t i = 0; i < hs; ++i) D += static_cast<double>(dd[i]) * o[i];
        double* gqr = g.q(b * T + t, h);
        for (int64_t t2 = 0; t2 < n; ++t2) {
          const float* kr = k + (b * T + t2) * d.ldk + kh * hs;
          const float* vr = v + (b * T + t2) * d.ldv + kh * hs;
          double* gkr = g.k(b * T + t2, kh);
          double* gvr = g.v(b * T + t2, kh);
          double s = 0.0, dp = 0.0;
          for (int64_t i = 0; i < hs; ++i) {
            s += static_cast<double>(qr[i]) * kr[i];
            dp += static_cast<double>(dd[i]) * vr[i];
          }
          const double p = std::exp(s * scale - l);
          const double ds = p * (dp - D) * scale;  // gradient of the unscaled score q . k
          for (int64_t i = 0; i < hs; ++i) {
            gvr[i] += p * dd[i];
            gqr[i] += ds * kr[i];
            gkr[i] += ds * qr[i];
          }
        }
      }
    }
  }
  g.store(dq, dk, dv);
}

// The fused-qkv entry points are in ref_attention.cpp (kernels/fused_attention.inc).

}  // namespace snug::ref

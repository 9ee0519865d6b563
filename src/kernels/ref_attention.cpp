// Reference multi-head self-attention (general form: strided q, k, v, GQA head mapping, causal or
// bidirectional): the textbook loops, double accumulation.
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/flash_attention.h"
#include "kernels/kernels.h"
#include "kernels/ref_attention_grads.h"

namespace snug::ref {

void attention_forward_gqa(float* out, float* att, const float* q, const float* k, const float* v,
                           const AttentionDims& d) {
  check_attention_dims(d, "attention");
  const int64_t B = d.B, T = d.T, NH = d.NH, hs = d.hs, rep = d.NH / d.NKV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> row(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t kh = h / rep;
      float* a = att + (b * NH + h) * T * T;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t n = d.causal ? t + 1 : T;  // keys [0, n) visible
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
        for (int64_t t2 = 0; t2 < T; ++t2)
          a[t * T + t2] = t2 < n ? static_cast<float>(row[t2] / sum) : 0.0f;
        float* o = out + (b * T + t) * d.ldo + h * hs;
        for (int64_t i = 0; i < hs; ++i) {
          double acc = 0.0;
          for (int64_t t2 = 0; t2 < n; ++t2)
            acc += (row[t2] / sum) * v[(b * T + t2) * d.ldv + kh * hs + i];
          o[i] = static_cast<float>(acc);
        }
      }
    }
  }
}

// Leaves att intact (the contract allows the fast version to destroy it).
void attention_backward_gqa(float* dq, float* dk, float* dv, const float* dout, const float* q,
                            const float* k, const float* v, float* att, const AttentionDims& d) {
  check_attention_dims(d, "attention");
  const int64_t B = d.B, T = d.T, NH = d.NH, NKV = d.NKV, hs = d.hs, rep = NH / NKV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  detail::AttentionGrads g(d);
  std::vector<double> datt(static_cast<size_t>(T));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < NH; ++h) {
      const int64_t kh = h / rep;
      const float* a = att + (b * NH + h) * T * T;
      for (int64_t t = 0; t < T; ++t) {
        const int64_t n = d.causal ? t + 1 : T;
        const float* dd = dout + (b * T + t) * d.ldo + h * hs;
        // out[t] = sum_t2 a[t,t2] v[t2]  ->  datt[t2] = d . v[t2], dv[t2] += a[t,t2] d.
        for (int64_t t2 = 0; t2 < n; ++t2) {
          const float* vr = v + (b * T + t2) * d.ldv + kh * hs;
          double* gvr = g.v(b * T + t2, kh);
          double dot = 0.0;
          for (int64_t i = 0; i < hs; ++i) {
            dot += static_cast<double>(dd[i]) * vr[i];
            gvr[i] += static_cast<double>(a[t * T + t2]) * dd[i];
          }
          datt[t2] = dot;
        }
        // Softmax backward: dpre = a * (datt - sum(a * datt)).
        double s = 0.0;
        for (int64_t t2 = 0; t2 < n; ++t2) s += a[t * T + t2] * datt[t2];
        const float* qr = q + (b * T + t) * d.ldq + h * hs;
        double* gqr = g.q(b * T + t, h);
        for (int64_t t2 = 0; t2 < n; ++t2) {
          const double dpre = a[t * T + t2] * (datt[t2] - s) * scale;
          const float* kr = k + (b * T + t2) * d.ldk + kh * hs;
          double* gkr = g.k(b * T + t2, kh);
          for (int64_t i = 0; i < hs; ++i) {
            gqr[i] += dpre * kr[i];
            gkr[i] += dpre * qr[i];
          }
        }
      }
    }
  }
  g.store(dq, dk, dv);
}

#include "kernels/fused_attention.inc"

}  // namespace snug::ref

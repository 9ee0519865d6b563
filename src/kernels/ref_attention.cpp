// Reference multi-head self-attention (general form: strided q, k, v, GQA head mapping, causal or
// bidirectional): the textbook loops, double accumulation.
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/dropout_mask.h"
#include "kernels/flash_attention.h"
#include "kernels/kernels.h"
#include "kernels/ref_attention_common.h"

namespace snug::ref {

using detail::head_row;

void attention_forward_gqa(float* out, float* att, const float* q, const float* k, const float* v,
                           const AttentionDims& d) {
  check_attention_dims(d, "attention");
  const int64_t T = d.T, hs = d.hs;
  std::vector<double> row(static_cast<size_t>(T));
  detail::for_each_query_row(
      d, [&](int64_t b, int64_t h, int64_t kh, int64_t t, int64_t lo, int64_t n) {
        const double sum = detail::exp_scores(row.data(), q, k, d, b, h, kh, t, lo, n).sum;
        float* a = att + ((b * d.NH + h) * T + t) * T;
        for (int64_t t2 = 0; t2 < T; ++t2)
          a[t2] = t2 >= lo && t2 < n ? static_cast<float>(row[t2] / sum) : 0.0f;
        // With dropout, v is weighted by the dropped probabilities (kept also for backward).
        const float* w = a;
        if (d.dropout_p > 0) {
          const int64_t at = ((b * d.NH + h) * T + t) * T;
          const float inv = static_cast<float>(1.0 / (1.0 - d.dropout_p));
          for (int64_t t2 = 0; t2 < T; ++t2) {
            const bool keep =
                kernels::dropout_keep(d.dropout_key, dropout_index(d, b, h, t, t2), d.dropout_p);
            d.drop_mask[at + t2] = keep ? 1 : 0;
            d.att_dropped[at + t2] = keep ? a[t2] * inv : 0.0f;
          }
          w = d.att_dropped + at;
        }
        float* o = out + (b * T + t) * d.ldo + h * hs;
        for (int64_t i = 0; i < hs; ++i) {
          double acc = 0.0;
          for (int64_t t2 = lo; t2 < n; ++t2)
            acc += static_cast<double>(w[t2]) * head_row(v, d.ldv, d, b, t2, kh)[i];
          o[i] = static_cast<float>(acc);
        }
      });
}

// Leaves att intact (the contract allows the fast version to destroy it).
void attention_backward_gqa(float* dq, float* dk, float* dv, const float* dout, const float* q,
                            const float* k, const float* v, float* att, const AttentionDims& d) {
  check_attention_dims(d, "attention");
  detail::AttentionGrads g(d);
  const int64_t T = d.T, hs = d.hs;
  const double scale = detail::score_scale(d);
  std::vector<double> datt(static_cast<size_t>(T));
  detail::for_each_query_row(
      d, [&](int64_t b, int64_t h, int64_t kh, int64_t t, int64_t lo, int64_t n) {
        const int64_t at = ((b * d.NH + h) * T + t) * T;
        const float* a = att + at;  // row t of the probabilities
        const bool drop = d.dropout_p > 0;
        const float* w = drop ? d.att_dropped + at : a;  // what multiplied v
        const double inv = drop ? 1.0 / (1.0 - d.dropout_p) : 1.0;
        const float* dd = head_row(dout, d.ldo, d, b, t, h);
        // out[t] = sum_t2 w[t2] v[t2]  ->  datt[t2] = d . v[t2] (through the mask), dv[t2] +=
        // w[t2] d.
        for (int64_t t2 = lo; t2 < n; ++t2) {
          const float* vr = head_row(v, d.ldv, d, b, t2, kh);
          double* gvr = g.v(b * T + t2, kh);
          double dot = 0.0;
          for (int64_t i = 0; i < hs; ++i) {
            dot += static_cast<double>(dd[i]) * vr[i];
            gvr[i] += static_cast<double>(w[t2]) * dd[i];
          }
          datt[t2] = drop ? (d.drop_mask[at + t2] != 0 ? dot * inv : 0.0) : dot;
        }
        // Softmax backward: dpre = a * (datt - sum(a * datt)).
        double s = 0.0;
        for (int64_t t2 = lo; t2 < n; ++t2) s += a[t2] * datt[t2];
        const float* qr = head_row(q, d.ldq, d, b, t, h);
        double* gqr = g.q(b * T + t, h);
        for (int64_t t2 = lo; t2 < n; ++t2) {
          const double dpre = a[t2] * (datt[t2] - s) * scale;
          const float* kr = head_row(k, d.ldk, d, b, t2, kh);
          double* gkr = g.k(b * T + t2, kh);
          for (int64_t i = 0; i < hs; ++i) {
            gqr[i] += dpre * kr[i];
            gkr[i] += dpre * qr[i];
          }
        }
      });
  g.store(dq, dk, dv);
}

#include "kernels/fused_attention.inc"

}  // namespace snug::ref

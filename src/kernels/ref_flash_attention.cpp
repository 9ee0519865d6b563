// Reference memory-efficient attention: the textbook loops in double, with the same contract as
// the fast version (the forward saves lse, the backward recomputes the probabilities from q, k and
// lse and uses D = rowsum(dout * out)); general form: strided q, k, v, GQA, causal or not.
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/dropout_mask.h"
#include "kernels/flash_attention.h"
#include "kernels/ref_attention_common.h"

namespace snug::ref {

using detail::head_row;

namespace {

// 1/(1-p) when score (b,h,t,s) is kept by the dropout, 0 when dropped; 1 without dropout.
double keep_scale(const AttentionDims& d, int64_t b, int64_t h, int64_t t, int64_t s) {
  if (d.dropout_p <= 0) return 1.0;
  return kernels::dropout_keep(d.dropout_key, dropout_index(d, b, h, t, s), d.dropout_p)
             ? 1.0 / (1.0 - d.dropout_p)
             : 0.0;
}

}  // namespace

void flash_attention_forward_gqa(float* out, float* lse, const float* q, const float* k,
                                 const float* v, const AttentionDims& d) {
  check_attention_dims(d, "flash_attention");
  const int64_t T = d.T, hs = d.hs;
  std::vector<double> row(static_cast<size_t>(T));
  detail::for_each_query_row(
      d, [&](int64_t b, int64_t h, int64_t kh, int64_t t, int64_t lo, int64_t n) {
        const detail::ExpScores e = detail::exp_scores(row.data(), q, k, d, b, h, kh, t, lo, n);
        lse[(b * d.NH + h) * T + t] = static_cast<float>(e.max + std::log(e.sum));
        float* o = out + (b * T + t) * d.ldo + h * hs;
        for (int64_t i = 0; i < hs; ++i) {
          double acc = 0.0;
          for (int64_t t2 = lo; t2 < n; ++t2)
            acc += row[t2] * keep_scale(d, b, h, t, t2) * head_row(v, d.ldv, d, b, t2, kh)[i];
          o[i] = static_cast<float>(acc / e.sum);
        }
      });
}

void flash_attention_backward_gqa(float* dq, float* dk, float* dv, const float* dout,
                                  const float* q, const float* k, const float* v, const float* out,
                                  const float* lse, const AttentionDims& d) {
  check_attention_dims(d, "flash_attention");
  detail::AttentionGrads g(d);
  const int64_t T = d.T, hs = d.hs;
  const double scale = detail::score_scale(d);
  detail::for_each_query_row(
      d, [&](int64_t b, int64_t h, int64_t kh, int64_t t, int64_t lo, int64_t n) {
        const float* qr = head_row(q, d.ldq, d, b, t, h);
        const float* dd = head_row(dout, d.ldo, d, b, t, h);
        const float* o = head_row(out, d.ldo, d, b, t, h);
        const double l = lse[(b * d.NH + h) * T + t];
        // D = sum_t2 p[t2] (d . v[t2]) = d . out[t].
        double D = 0.0;
        for (int64_t i = 0; i < hs; ++i) D += static_cast<double>(dd[i]) * o[i];
        double* gqr = g.q(b * T + t, h);
        for (int64_t t2 = lo; t2 < n; ++t2) {
          const float* kr = head_row(k, d.ldk, d, b, t2, kh);
          const float* vr = head_row(v, d.ldv, d, b, t2, kh);
          double* gkr = g.k(b * T + t2, kh);
          double* gvr = g.v(b * T + t2, kh);
          double s = 0.0, dp = 0.0;
          for (int64_t i = 0; i < hs; ++i) {
            s += static_cast<double>(qr[i]) * kr[i];
            dp += static_cast<double>(dd[i]) * vr[i];
          }
          const double p = std::exp(s * scale - l);
          const double m = keep_scale(d, b, h, t, t2);
          // With dropout D = d . out is still sum_t2 p[t2] m[t2] (d . v[t2]).
          const double ds = p * (dp * m - D) * scale;  // gradient of the unscaled score q . k
          for (int64_t i = 0; i < hs; ++i) {
            gvr[i] += p * m * dd[i];
            gqr[i] += ds * kr[i];
            gkr[i] += ds * qr[i];
          }
        }
      });
  g.store(dq, dk, dv);
}

// The fused-qkv entry points are in ref_attention.cpp (kernels/fused_attention.inc).

}  // namespace snug::ref

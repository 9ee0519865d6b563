// Reference memory-efficient attention: the textbook loops in double, with the same contract as
// the fast version (the forward saves lse, the backward recomputes the probabilities from q, k and
// lse and uses D = rowsum(dout * out)); general form: strided q, k, v, GQA, causal or not.
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/flash_attention.h"

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
  std::vector<double> gq(static_cast<size_t>(B * T * NH * hs), 0.0);
  std::vector<double> gk(static_cast<size_t>(B * T * NKV * hs), 0.0), gv(gk.size(), 0.0);
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
        double* gqr = gq.data() + ((b * T + t) * NH + h) * hs;
        for (int64_t t2 = 0; t2 < n; ++t2) {
          const float* kr = k + (b * T + t2) * d.ldk + kh * hs;
          const float* vr = v + (b * T + t2) * d.ldv + kh * hs;
          double* gkr = gk.data() + ((b * T + t2) * NKV + kh) * hs;
          double* gvr = gv.data() + ((b * T + t2) * NKV + kh) * hs;
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
  for (int64_t bt = 0; bt < B * T; ++bt) {
    for (int64_t i = 0; i < NH * hs; ++i)
      dq[bt * d.ldq + i] = static_cast<float>(gq[static_cast<size_t>(bt * NH * hs + i)]);
    for (int64_t i = 0; i < NKV * hs; ++i) {
      dk[bt * d.ldk + i] = static_cast<float>(gk[static_cast<size_t>(bt * NKV * hs + i)]);
      dv[bt * d.ldv + i] = static_cast<float>(gv[static_cast<size_t>(bt * NKV * hs + i)]);
    }
  }
}

void flash_attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t T,
                             int64_t C, int64_t NH) {
  SNUG_CHECK(NH > 0 && C % NH == 0, "flash_attention: C=", C, " is not a multiple of NH=", NH);
  flash_attention_forward_gqa(out, lse, qkv, qkv + C, qkv + 2 * C, fused_qkv_dims(B, T, C, NH));
}

void flash_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                              const float* lse, int64_t B, int64_t T, int64_t C, int64_t NH) {
  SNUG_CHECK(NH > 0 && C % NH == 0, "flash_attention: C=", C, " is not a multiple of NH=", NH);
  flash_attention_backward_gqa(dqkv, dqkv + C, dqkv + 2 * C, dout, qkv, qkv + C, qkv + 2 * C, out,
                               lse, fused_qkv_dims(B, T, C, NH));
}

}  // namespace snug::ref

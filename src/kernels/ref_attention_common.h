// Internal to the reference attention kernels (ref_attention.cpp, ref_flash_attention.cpp), which
// walk the same rows and score them the same way, in double:
//   for_each_query_row  every query row of every (batch, query head), with its kv head and the
//                       keys visible to it (a range: its document's, with position ids);
//   exp_scores          one row's exp(scaled score q . k - max), with its max and sum;
//   AttentionGrads      the gradients of q (B*T rows of NH*hs) and of k, v (B*T rows of NKV*hs)
//                       accumulated densely in double, then stored into the caller's strided
//                       float outputs.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/attention_dims.h"

namespace snug::ref::detail {

// body(b, h, kh, t, lo, n) for b, h, t in that nesting order: query row t of head h of batch b,
// kh the kv head of h, keys [lo, n) visible to the row (n = t + 1 if causal, else T; lo its
// document's first row with position ids, else 0).
template <typename Body>
void for_each_query_row(const AttentionDims& d, const Body& body) {
  const int64_t rep = d.NH / d.NKV;
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t h = 0; h < d.NH; ++h)
      for (int64_t t = 0; t < d.T; ++t)
        body(b, h, h / rep, t, first_key(d, b, t), d.causal ? t + 1 : d.T);
}

// Row t of batch b, head `head` of an operand with row stride ld.
inline const float* head_row(const float* x, int64_t ld, const AttentionDims& d, int64_t b,
                             int64_t t, int64_t head) {
  return x + (b * d.T + t) * ld + head * d.hs;
}

// The score scale 1/sqrt(hs).
inline double score_scale(const AttentionDims& d) {
  return 1.0 / std::sqrt(static_cast<double>(d.hs));
}

// The unnormalized softmax of query row t of head h (batch b) over keys [lo, n) of kv head kh:
// with the scores s[t2] = scale * q(b,t,h) . k(b,t2,kh), row[t2] = exp(s[t2] - max) for t2 in
// [lo, n); returns max and sum (the probabilities are row / sum, the log-sum-exp max + log(sum)).
struct ExpScores {
  double max, sum;
};

inline ExpScores exp_scores(double* row, const float* q, const float* k, const AttentionDims& d,
                            int64_t b, int64_t h, int64_t kh, int64_t t, int64_t lo, int64_t n) {
  const double scale = score_scale(d);
  const float* qr = head_row(q, d.ldq, d, b, t, h);
  double maxv = -INFINITY;
  for (int64_t t2 = lo; t2 < n; ++t2) {
    const float* kr = head_row(k, d.ldk, d, b, t2, kh);
    double dot = 0.0;
    for (int64_t i = 0; i < d.hs; ++i) dot += static_cast<double>(qr[i]) * kr[i];
    row[t2] = dot * scale;
    if (row[t2] > maxv) maxv = row[t2];
  }
  double sum = 0.0;
  for (int64_t t2 = lo; t2 < n; ++t2) {
    row[t2] = std::exp(row[t2] - maxv);
    sum += row[t2];
  }
  return {maxv, sum};
}

class AttentionGrads {
 public:
  explicit AttentionGrads(const AttentionDims& d)
      : d_(d),
        q_(static_cast<size_t>(d.B * d.T * d.NH * d.hs), 0.0),
        k_(static_cast<size_t>(d.B * d.T * d.NKV * d.hs), 0.0),
        v_(k_.size(), 0.0) {}

  // Row bt = b*T + t, head h (query) or kv head kh.
  double* q(int64_t bt, int64_t h) { return q_.data() + (bt * d_.NH + h) * d_.hs; }
  double* k(int64_t bt, int64_t kh) { return k_.data() + (bt * d_.NKV + kh) * d_.hs; }
  double* v(int64_t bt, int64_t kh) { return v_.data() + (bt * d_.NKV + kh) * d_.hs; }

  // dq, dk, dv (overwrite) at the strides ldq, ldk, ldv.
  void store(float* dq, float* dk, float* dv) const {
    const int64_t wq = d_.NH * d_.hs, wkv = d_.NKV * d_.hs;
    for (int64_t bt = 0; bt < d_.B * d_.T; ++bt) {
      for (int64_t i = 0; i < wq; ++i)
        dq[bt * d_.ldq + i] = static_cast<float>(q_[static_cast<size_t>(bt * wq + i)]);
      for (int64_t i = 0; i < wkv; ++i) {
        dk[bt * d_.ldk + i] = static_cast<float>(k_[static_cast<size_t>(bt * wkv + i)]);
        dv[bt * d_.ldv + i] = static_cast<float>(v_[static_cast<size_t>(bt * wkv + i)]);
      }
    }
  }

 private:
  AttentionDims d_;
  std::vector<double> q_, k_, v_;
};

}  // namespace snug::ref::detail

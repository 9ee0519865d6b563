// Multi-head self-attention on strided q, k, v (the fused qkv(B,T,3C) projection being one case:
// three column slices with row stride 3C).
//
// Every head's q, k, v are strided views, so the matrix products go straight to gemm_f32 with no
// packing. GQA: query head h reads kv head h / (NH/NKV) in place, nothing is expanded; the
// backward runs one job per (batch, kv head) and sums the gradients of its NH/NKV query heads into
// dk and dv (the first overwrites, the rest accumulate). The causal structure is exploited by
// blocks of kBlock query rows: rows [t0, t1) only ever see keys [0, t1), so the products are
// computed on that rectangle only (the waste is the upper triangle of one diagonal block, not
// half the matrix); bidirectional attention computes the full rows.
// gemm_f32 is called from inside the OpenMP loop over (batch, head[, row block]) jobs, where
// oneDNN runs single-threaded per call.
//
// Scratch: attention_backward keeps one thread-local buffer of kBlock * T floats (the
// gradient of a block of attention rows before the softmax backward); attention_forward
// needs none (the scores are computed in place in att).
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/flash_attention.h"
#include "kernels/kernels.h"
#include "kernels/row_softmax.h"

namespace snug::kernels {

namespace {

constexpr int64_t kBlock = 32;

// row[0..n) <- softmax(row[0..n)); row[n..T) <- 0.
void masked_softmax_row(float* row, int64_t n, int64_t T) {
  const float sum = detail::exp_shifted(row, row, n, detail::row_max(row, n));
  detail::scale_row(row, n, 1.0f / sum);
  std::fill(row + n, row + T, 0.0f);
}

}  // namespace

void attention_forward_gqa(float* out, float* att, const float* q, const float* k, const float* v,
                           const AttentionDims& d) {
  check_attention_dims(d, "attention");
  const int64_t B = d.B, T = d.T, NH = d.NH, hs = d.hs, rep = d.NH / d.NKV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const int64_t nblk = (T + kBlock - 1) / kBlock;
  const int64_t jobs = B * NH * nblk;
  // Jobs run from the largest row block (the last one) down, which balances dynamic scheduling.
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t job = 0; job < jobs; ++job) {
    const int64_t blk = nblk - 1 - job % nblk;
    const int64_t bh = job / nblk;
    const int64_t b = bh / NH;
    const int64_t h = bh % NH;
    const int64_t kh = h / rep;
    const int64_t t0 = blk * kBlock;
    const int64_t t1 = std::min(T, t0 + kBlock);
    const int64_t kend = d.causal ? t1 : T;  // keys [0, kend) are visible to rows [t0, t1)
    const float* qp = q + (b * T + t0) * d.ldq + h * hs;
    const float* kp = k + b * T * d.ldk + kh * hs;
    const float* vp = v + b * T * d.ldv + kh * hs;
    float* a = att + bh * T * T + t0 * T;
    // Scores a[t0:t1, 0:kend] = scale * q[t0:t1] k[0:kend]^T.
    gemm_f32(false, true, t1 - t0, kend, hs, scale, qp, d.ldq, kp, d.ldk, 0.0f, a, T);
    for (int64_t t = t0; t < t1; ++t) masked_softmax_row(a + (t - t0) * T, d.causal ? t + 1 : T, T);
    // out[t0:t1, head h] = a[t0:t1, 0:kend] v[0:kend].
    gemm_f32(false, false, t1 - t0, hs, kend, 1.0f, a, T, vp, d.ldv, 0.0f,
             out + (b * T + t0) * d.ldo + h * hs, d.ldo);
  }
}

void attention_backward_gqa(float* dq, float* dk, float* dv, const float* dout, const float* q,
                            const float* k, const float* v, float* att, const AttentionDims& d) {
  check_attention_dims(d, "attention");
  const int64_t B = d.B, T = d.T, NH = d.NH, NKV = d.NKV, hs = d.hs, rep = NH / NKV;
  const int64_t ldq = d.ldq, ldk = d.ldk, ldv = d.ldv, ldo = d.ldo;
  const bool causal = d.causal;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  // dk and dv of a kv head sum over all query rows of its query heads, so a job is a whole
  // (batch, kv head) pair.
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t bkv = 0; bkv < B * NKV; ++bkv) {
    thread_local std::vector<float> scratch;
    if (scratch.size() < static_cast<size_t>(kBlock * T)) scratch.resize(kBlock * T);
    float* datt = scratch.data();

    const int64_t b = bkv / NKV;
    const int64_t kh = bkv % NKV;
    const float* kp = k + b * T * ldk + kh * hs;
    const float* vp = v + b * T * ldv + kh * hs;
    float* dkp = dk + b * T * ldk + kh * hs;
    float* dvp = dv + b * T * ldv + kh * hs;
    for (int64_t r = 0; r < rep; ++r) {
      const int64_t h = kh * rep + r;
      const float* qp = q + b * T * ldq + h * hs;
      float* dqp = dq + b * T * ldq + h * hs;
      const float* dd = dout + b * T * ldo + h * hs;
      float* a = att + (b * NH + h) * T * T;
      const float beta_kv = r == 0 ? 0.0f : 1.0f;  // the first query head overwrites dk, dv

      // dv = a^T d. Keys [s0, s1) receive from queries [s0, T) only (causal) or from all.
      for (int64_t s0 = 0; s0 < T; s0 += kBlock) {
        const int64_t s1 = std::min(T, s0 + kBlock);
        const int64_t r0 = causal ? s0 : 0;
        gemm_f32(true, false, s1 - s0, hs, T - r0, 1.0f, a + r0 * T + s0, T, dd + r0 * ldo, ldo,
                 beta_kv, dvp + s0 * ldv, ldv);
      }
      // Per block of query rows: datt = d v^T, then the softmax backward in place in a
      // (a becomes dpreatt, with the 1/sqrt(hs) scale folded in), then dq = dpreatt k.
      for (int64_t t0 = 0; t0 < T; t0 += kBlock) {
        const int64_t t1 = std::min(T, t0 + kBlock);
        const int64_t kend = causal ? t1 : T;
        gemm_f32(false, true, t1 - t0, kend, hs, 1.0f, dd + t0 * ldo, ldo, vp, ldv, 0.0f, datt,
                 kend);
        for (int64_t t = t0; t < t1; ++t) {
          float* arow = a + t * T;
          const float* drow = datt + (t - t0) * kend;
          const int64_t n = causal ? t + 1 : T;
          const float dot = detail::row_dot(arow, drow, n);
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) arow[j] = scale * arow[j] * (drow[j] - dot);
          std::fill(arow + n, arow + T, 0.0f);
        }
        gemm_f32(false, false, t1 - t0, hs, kend, 1.0f, a + t0 * T, T, kp, ldk, 0.0f,
                 dqp + t0 * ldq, ldq);
      }
      // dk = dpreatt^T q, again skipping the zeros above the diagonal.
      for (int64_t s0 = 0; s0 < T; s0 += kBlock) {
        const int64_t s1 = std::min(T, s0 + kBlock);
        const int64_t r0 = causal ? s0 : 0;
        gemm_f32(true, false, s1 - s0, hs, T - r0, 1.0f, a + r0 * T + s0, T, qp + r0 * ldq, ldq,
                 beta_kv, dkp + s0 * ldk, ldk);
      }
    }
  }
}

#include "kernels/fused_attention.inc"

}  // namespace snug::kernels

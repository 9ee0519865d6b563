// Multi-head self-attention on strided q, k, v (the fused qkv(B,T,3C) projection being one case:
// three column slices with row stride 3C).
//
// Every head's q, k, v are strided views, so the matrix products go straight to gemm_f32 with no
// packing. GQA: query head h reads kv head h / (NH/NKV) in place, nothing is expanded; the
// backward runs one job per (batch, kv head) and sums the gradients of its NH/NKV query heads into
// dk and dv (the first overwrites, the rest accumulate). The causal structure is exploited by
// blocks of kQueryBlock query rows: rows [t0, t1) only ever see keys [0, t1), so the products are
// computed on that rectangle only (the waste is the upper triangle of one diagonal block, not
// half the matrix); bidirectional attention computes the full rows. With position ids
// (kernels/attention_dims.h) a block also skips the keys before its first row's document, and
// each row's probabilities are 0 outside its own document; the backward then needs no change,
// since it reads the mask from those zeros.
// gemm_f32 is called from inside the OpenMP loop over (batch, head[, row block]) jobs, where
// oneDNN runs single-threaded per call.
//
// Scratch: attention_backward keeps one thread-local buffer of kQueryBlock * T floats (the
// gradient of a block of attention rows before the softmax backward); attention_forward
// needs none (the scores are computed in place in att).
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/attention_jobs.h"
#include "kernels/dropout_mask.h"
#include "kernels/flash_attention.h"
#include "kernels/kernels.h"
#include "kernels/row_softmax.h"

namespace snug::kernels {

namespace {

constexpr int64_t kQueryBlock = 32;

// row[lo..n) <- softmax(row[lo..n)); row[0..lo) and row[n..T) <- 0.
void masked_softmax_row(float* row, int64_t lo, int64_t n, int64_t T) {
  const float sum =
      detail::exp_shifted(row + lo, row + lo, n - lo, detail::row_max(row + lo, n - lo));
  detail::scale_row(row + lo, n - lo, 1.0f / sum);
  std::fill(row, row + lo, 0.0f);
  std::fill(row + n, row + T, 0.0f);
}

}  // namespace

void attention_forward_gqa(float* out, float* att, const float* q, const float* k, const float* v,
                           const AttentionDims& d) {
  check_attention_dims(d, "attention");
  const int64_t T = d.T, hs = d.hs;
  const float scale = detail::attention_scale(d);
  const int64_t jobs = detail::query_block_jobs(d, kQueryBlock);  // largest blocks first
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t job = 0; job < jobs; ++job) {
    const detail::QueryBlock blk = detail::query_block(d, kQueryBlock, job, q, k, v, out);
    const int64_t t0 = blk.t0, t1 = blk.t1, kend = blk.kend, b = blk.bh / d.NH;
    // Keys before row t0's document are visible to no row of the block (documents start in
    // order): kb = 0 without position ids.
    const int64_t kb = first_key(d, b, t0);
    float* a = att + blk.bh * T * T + t0 * T;
    // Scores a[t0:t1, kb:kend] = scale * q[t0:t1] k[kb:kend]^T.
    gemm_f32(false, true, t1 - t0, kend - kb, hs, scale, blk.q, d.ldq, blk.k + kb * d.ldk, d.ldk,
             0.0f, a + kb, T);
    for (int64_t t = t0; t < t1; ++t)
      masked_softmax_row(a + (t - t0) * T, first_key(d, b, t), d.causal ? t + 1 : T, T);
    // With dropout v is weighted by the dropped probabilities, kept (with the mask) for backward.
    const float* w = a;
    if (d.dropout_p > 0) {
      const float inv = static_cast<float>(1.0 / (1.0 - d.dropout_p));
      const int64_t base = blk.bh * T * T + t0 * T;
      for (int64_t i = 0; i < (t1 - t0) * T; ++i) {
        const bool keep = dropout_keep(d.dropout_key, base + i, d.dropout_p);
        d.drop_mask[base + i] = keep ? 1 : 0;
        d.att_dropped[base + i] = keep ? a[i] * inv : 0.0f;
      }
      w = d.att_dropped + base;
    }
    // out[t0:t1, head h] = w[t0:t1, kb:kend] v[kb:kend].
    gemm_f32(false, false, t1 - t0, hs, kend - kb, 1.0f, w + kb, T, blk.v + kb * d.ldv, d.ldv, 0.0f,
             blk.out, d.ldo);
  }
}

void attention_backward_gqa(float* dq, float* dk, float* dv, const float* dout, const float* q,
                            const float* k, const float* v, float* att, const AttentionDims& d) {
  check_attention_dims(d, "attention");
  const int64_t T = d.T, hs = d.hs;
  const float scale = detail::attention_scale(d);
  // One job per (batch, kv head): it owns that head's dk and dv (kernels/attention_jobs.h).
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t bkv = 0; bkv < d.B * d.NKV; ++bkv) {
    thread_local std::vector<float> scratch;
    if (scratch.size() < static_cast<size_t>(kQueryBlock * T)) scratch.resize(kQueryBlock * T);
    float* datt = scratch.data();

    const detail::KvHeadJob job = detail::kv_head_job(d, bkv, k, v, dk, dv);
    const float *kp = job.k, *vp = job.v;
    float *dkp = job.dk, *dvp = job.dv;
    for (int64_t r = 0; r < d.NH / d.NKV; ++r) {
      const detail::QueryHeadOfJob head = detail::query_head_of(d, job, r, q, dq, dout, nullptr);
      const float* qp = head.q;
      float* dqp = head.dq;
      const float* dd = head.dout;
      const int64_t abase = (job.b * d.NH + head.h) * T * T;
      float* a = att + abase;
      const float beta_kv = r == 0 ? 0.0f : 1.0f;  // the first query head overwrites dk, dv
      const bool drop = d.dropout_p > 0;
      const float* w = drop ? d.att_dropped + abase : a;  // what multiplied v
      const uint8_t* mask = drop ? d.drop_mask + abase : nullptr;
      const float inv = drop ? static_cast<float>(1.0 / (1.0 - d.dropout_p)) : 1.0f;

      // dv = w^T d. Keys [s0, s1) receive from queries [s0, T) only (causal) or from all.
      for (int64_t s0 = 0; s0 < T; s0 += kQueryBlock) {
        const int64_t s1 = std::min(T, s0 + kQueryBlock);
        const int64_t r0 = d.causal ? s0 : 0;
        gemm_f32(true, false, s1 - s0, hs, T - r0, 1.0f, w + r0 * T + s0, T, dd + r0 * d.ldo, d.ldo,
                 beta_kv, dvp + s0 * d.ldv, d.ldv);
      }
      // Per block of query rows: datt = d v^T, then the softmax backward in place in a
      // (a becomes dpreatt, with the 1/sqrt(hs) scale folded in), then dq = dpreatt k.
      for (int64_t t0 = 0; t0 < T; t0 += kQueryBlock) {
        const int64_t t1 = std::min(T, t0 + kQueryBlock);
        const int64_t kend = d.causal ? t1 : T;
        gemm_f32(false, true, t1 - t0, kend, hs, 1.0f, dd + t0 * d.ldo, d.ldo, vp, d.ldv, 0.0f,
                 datt, kend);
        for (int64_t t = t0; t < t1; ++t) {
          float* arow = a + t * T;
          float* drow = datt + (t - t0) * kend;
          const int64_t n = d.causal ? t + 1 : T;
          if (drop) {  // through the dropout: d(dropped)/d(probability) = mask / (1 - p)
            const uint8_t* mrow = mask + t * T;
            for (int64_t j = 0; j < n; ++j) drow[j] = mrow[j] ? drow[j] * inv : 0.0f;
          }
          const float dot = detail::row_dot(arow, drow, n);
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) arow[j] = scale * arow[j] * (drow[j] - dot);
          std::fill(arow + n, arow + T, 0.0f);
        }
        gemm_f32(false, false, t1 - t0, hs, kend, 1.0f, a + t0 * T, T, kp, d.ldk, 0.0f,
                 dqp + t0 * d.ldq, d.ldq);
      }
      // dk = dpreatt^T q, again skipping the zeros above the diagonal.
      for (int64_t s0 = 0; s0 < T; s0 += kQueryBlock) {
        const int64_t s1 = std::min(T, s0 + kQueryBlock);
        const int64_t r0 = d.causal ? s0 : 0;
        gemm_f32(true, false, s1 - s0, hs, T - r0, 1.0f, a + r0 * T + s0, T, qp + r0 * d.ldq, d.ldq,
                 beta_kv, dkp + s0 * d.ldk, d.ldk);
      }
    }
  }
}

#include "kernels/fused_attention.inc"

}  // namespace snug::kernels

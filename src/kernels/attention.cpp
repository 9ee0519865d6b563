// Causal multi-head self-attention on the fused qkv(B,T,3C) projection.
//
// Every head's q, k, v are strided views into qkv (row stride 3C), so the matrix products go
// straight to gemm_f32 with no packing. The causal structure is exploited by blocks of kBlock
// query rows: rows [t0, t1) only ever see keys [0, t1), so the products are computed on that
// rectangle only (the waste is the upper triangle of one diagonal block, not half the matrix).
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
#include "kernels/fast_math.h"
#include "kernels/kernels.h"

namespace snug::kernels {

namespace {

constexpr int64_t kBlock = 32;

// row[0..n) <- softmax(row[0..n)); row[n..T) <- 0.
void causal_softmax_row(float* row, int64_t n, int64_t T) {
  float maxv = -INFINITY;
#pragma omp simd reduction(max : maxv)
  for (int64_t j = 0; j < n; ++j) maxv = row[j] > maxv ? row[j] : maxv;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < n; ++j) {
    const float e = detail::fast_exp(row[j] - maxv);
    row[j] = e;
    sum += e;
  }
  const float inv = 1.0f / sum;
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
  std::fill(row + n, row + T, 0.0f);
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int64_t B, int64_t T, int64_t C,
                       int64_t NH) {
  SNUG_CHECK(NH > 0 && C % NH == 0, "attention: C=", C, " is not a multiple of NH=", NH);
  const int64_t hs = C / NH;
  const int64_t C3 = 3 * C;
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
    const int64_t t0 = blk * kBlock;
    const int64_t t1 = std::min(T, t0 + kBlock);
    const float* q = qkv + (b * T + t0) * C3 + h * hs;
    const float* k = qkv + b * T * C3 + C + h * hs;
    const float* v = qkv + b * T * C3 + 2 * C + h * hs;
    float* a = att + bh * T * T + t0 * T;
    // Scores a[t0:t1, 0:t1] = scale * q[t0:t1] k[0:t1]^T.
    gemm_f32(false, true, t1 - t0, t1, hs, scale, q, C3, k, C3, 0.0f, a, T);
    for (int64_t t = t0; t < t1; ++t) causal_softmax_row(a + (t - t0) * T, t + 1, T);
    // out[t0:t1, head h] = a[t0:t1, 0:t1] v[0:t1].
    gemm_f32(false, false, t1 - t0, hs, t1, 1.0f, a, T, v, C3, 0.0f,
             out + (b * T + t0) * C + h * hs, C);
  }
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, float* att, int64_t B,
                        int64_t T, int64_t C, int64_t NH) {
  SNUG_CHECK(NH > 0 && C % NH == 0, "attention: C=", C, " is not a multiple of NH=", NH);
  const int64_t hs = C / NH;
  const int64_t C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  // dk and dv of a head sum over all query rows, so a job is a whole (batch, head) pair.
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t bh = 0; bh < B * NH; ++bh) {
    thread_local std::vector<float> scratch;
    if (scratch.size() < static_cast<size_t>(kBlock * T)) scratch.resize(kBlock * T);
    float* datt = scratch.data();

    const int64_t b = bh / NH;
    const int64_t h = bh % NH;
    const float* q = qkv + b * T * C3 + h * hs;
    const float* k = q + C;
    const float* v = q + 2 * C;
    float* dq = dqkv + b * T * C3 + h * hs;
    float* dk = dq + C;
    float* dv = dq + 2 * C;
    const float* d = dout + b * T * C + h * hs;
    float* a = att + bh * T * T;

    // dv = a^T d. Keys [s0, s1) receive from queries [s0, T) only.
    for (int64_t s0 = 0; s0 < T; s0 += kBlock) {
      const int64_t s1 = std::min(T, s0 + kBlock);
      gemm_f32(true, false, s1 - s0, hs, T - s0, 1.0f, a + s0 * T + s0, T, d + s0 * C, C, 0.0f,
               dv + s0 * C3, C3);
    }
    // Per block of query rows: datt = d v^T, then the softmax backward in place in a
    // (a becomes dpreatt, with the 1/sqrt(hs) scale folded in), then dq = dpreatt k.
    for (int64_t t0 = 0; t0 < T; t0 += kBlock) {
      const int64_t t1 = std::min(T, t0 + kBlock);
      gemm_f32(false, true, t1 - t0, t1, hs, 1.0f, d + t0 * C, C, v, C3, 0.0f, datt, t1);
      for (int64_t t = t0; t < t1; ++t) {
        float* arow = a + t * T;
        const float* drow = datt + (t - t0) * t1;
        const int64_t n = t + 1;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t j = 0; j < n; ++j) dot += arow[j] * drow[j];
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) arow[j] = scale * arow[j] * (drow[j] - dot);
        std::fill(arow + n, arow + T, 0.0f);
      }
      gemm_f32(false, false, t1 - t0, hs, t1, 1.0f, a + t0 * T, T, k, C3, 0.0f, dq + t0 * C3, C3);
    }
    // dk = dpreatt^T q, again skipping the zeros above the diagonal.
    for (int64_t s0 = 0; s0 < T; s0 += kBlock) {
      const int64_t s1 = std::min(T, s0 + kBlock);
      gemm_f32(true, false, s1 - s0, hs, T - s0, 1.0f, a + s0 * T + s0, T, q + s0 * C3, C3, 0.0f,
               dk + s0 * C3, C3);
    }
  }
}

}  // namespace snug::kernels

// Internal to the fast attention kernels (attention.cpp, flash_attention.cpp), which split the
// work the same way (gemm_f32 runs single-threaded inside each job):
//   forward: one job per (batch b, query head h, block of `rows` query rows), numbered so that
//     each head's last block (the largest under the causal mask) runs first, which balances
//     dynamic scheduling;
//   backward: one job per (batch b, kv head kh): dk and dv of a kv head sum over all query rows
//     of its NH/NKV query heads, so the job owns them and runs those query heads in turn.
// The structs below are a job's indices and its operands as strided views (at the row strides of
// AttentionDims), so that the index arithmetic is written once.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/attention_dims.h"

namespace snug::kernels::detail {

// The score scale 1/sqrt(hs).
inline float attention_scale(const AttentionDims& d) {
  return 1.0f / std::sqrt(static_cast<float>(d.hs));
}

// Forward jobs for blocks of `rows` query rows: B * NH * ceil(T / rows).
inline int64_t query_block_jobs(const AttentionDims& d, int64_t rows) {
  return d.B * d.NH * ((d.T + rows - 1) / rows);
}

// Forward job `job`: query rows [t0, t1) of head h of batch b.
struct QueryBlock {
  int64_t bh;      // b * NH + h
  int64_t h;       // query head
  int64_t t0, t1;  // query rows [t0, t1)
  int64_t kend;    // keys [0, kend) are visible to them (t1 if causal, else T)
  const float* q;  // row t0 of head h
  const float* k;  // row 0 of head h's kv head, likewise v
  const float* v;
  float* out;  // row t0 of head h
};

inline QueryBlock query_block(const AttentionDims& d, int64_t rows, int64_t job, const float* q,
                              const float* k, const float* v, float* out) {
  const int64_t nblk = (d.T + rows - 1) / rows;
  const int64_t blk = nblk - 1 - job % nblk;
  const int64_t bh = job / nblk;
  const int64_t b = bh / d.NH;
  const int64_t h = bh % d.NH;
  const int64_t kh = h / (d.NH / d.NKV);
  const int64_t t0 = blk * rows;
  const int64_t t1 = std::min(d.T, t0 + rows);
  return {bh,
          h,
          t0,
          t1,
          d.causal ? t1 : d.T,
          q + (b * d.T + t0) * d.ldq + h * d.hs,
          k + b * d.T * d.ldk + kh * d.hs,
          v + b * d.T * d.ldv + kh * d.hs,
          out + (b * d.T + t0) * d.ldo + h * d.hs};
}

// Backward job bkv in [0, B * NKV): kv head kh of batch b, row 0 of each operand.
struct KvHeadJob {
  int64_t b, kh;
  const float* k;
  const float* v;
  float* dk;
  float* dv;
};

inline KvHeadJob kv_head_job(const AttentionDims& d, int64_t bkv, const float* k, const float* v,
                             float* dk, float* dv) {
  const int64_t b = bkv / d.NKV;
  const int64_t kh = bkv % d.NKV;
  const int64_t ko = b * d.T * d.ldk + kh * d.hs;
  const int64_t vo = b * d.T * d.ldv + kh * d.hs;
  return {b, kh, k + ko, v + vo, dk + ko, dv + vo};
}

// Query head r in [0, NH/NKV) of a backward job's kv head: head h, row 0 of its q, dq, dout and
// out (out may be null: the naive kernel does not read it).
struct QueryHeadOfJob {
  int64_t h;
  const float* q;
  float* dq;
  const float* dout;
  const float* out;
};

inline QueryHeadOfJob query_head_of(const AttentionDims& d, const KvHeadJob& job, int64_t r,
                                    const float* q, float* dq, const float* dout,
                                    const float* out) {
  const int64_t h = job.kh * (d.NH / d.NKV) + r;
  const int64_t qo = job.b * d.T * d.ldq + h * d.hs;
  const int64_t oo = job.b * d.T * d.ldo + h * d.hs;
  return {h, q + qo, dq + qo, dout + oo, out ? out + oo : nullptr};
}

}  // namespace snug::kernels::detail

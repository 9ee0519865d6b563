// Memory-efficient attention: tiled, online softmax (FlashAttention-2 style, on the CPU), on
// strided q, k, v (the fused qkv being one case), with NH query heads over NKV kv heads (GQA: query
// head h reads kv head h / (NH/NKV), nothing expanded) and a causal or bidirectional mask.
//
// Forward, one job per (batch, head, query tile of kBr rows), largest tiles first: for each key
// tile of kBc keys up to the diagonal, S = scale * Q K^T (gemm_f32 on strided views into qkv),
// then per row the online softmax: the running max m and sum l are updated, the row's output
// accumulator (kept directly in out) is rescaled by exp(m_old - m_new), and out += P V (gemm_f32,
// beta = 1). At the end out /= l and lse = m + log(l). Masked entries (above the diagonal, only in
// the diagonal tile) are never exponentiated; they are set to 0 before P V. With position ids
// (kernels/attention_dims.h) the key tiles start at the one holding the query tile's first
// document start, a row's keys before its own document are masked the same way, and a row whose
// document starts after a key tile has no visible key there: it starts its softmax at the first
// tile where it has one (its output accumulator holds only zeros until then).
//
// Backward, one job per (batch, kv head), so that the thread owns dk and dv of that kv head and
// dq of its NH/NKV query heads, which it runs one after the other; per query head, for each
// query tile (lse_i loaded, D_i = rowsum(dO_i * O_i)), for each key tile up to the diagonal:
//   S = scale Q_i K_j^T;  P = exp(S - lse_i) (masked to 0);  dV_j += P^T dO_i;
//   dP = dO_i V_j^T;  dS = scale * P * (dP - D_i);  dQ_i += dS K_j;  dK_j += dS^T Q_i.
// dq/dk/dv are accumulated in place in dqkv (dk, dv zeroed first; dq written with beta = 0 by
// the first key tile).
//
// gemm_f32 is called inside the OpenMP loop, where oneDNN runs single-threaded per call.
// Scratch: thread-local, kBr * kBc (+ kBr * kBc in the backward) + 2 * kBr floats (see header).
#include "kernels/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/attention_jobs.h"
#include "kernels/dropout_mask.h"
#include "kernels/fast_math.h"
#include "kernels/kernels.h"
#include "kernels/row_softmax.h"

namespace snug::kernels {

namespace {

constexpr int64_t kBr = kFlashTile;  // query rows per tile
constexpr int64_t kBc = kFlashTile;  // keys per tile

float* thread_scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace

void flash_attention_forward_gqa(float* out, float* lse, const float* q, const float* k,
                                 const float* v, const AttentionDims& d) {
  check_attention_dims(d, "flash_attention");
  const int64_t T = d.T, hs = d.hs;
  const float scale = detail::attention_scale(d);
  const int64_t jobs = detail::query_block_jobs(d, kBr);  // largest query tiles first
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t job = 0; job < jobs; ++job) {
    float* S = thread_scratch(static_cast<size_t>(kBr * kBc + 2 * kBr));
    float* m = S + kBr * kBc;  // running row max of the scaled scores
    float* l = m + kBr;        // running row sum of exp(score - m)

    const detail::QueryBlock tile = detail::query_block(d, kBr, job, q, k, v, out);
    const int64_t t0 = tile.t0, nr = tile.t1 - tile.t0, kend = tile.kend, b = tile.bh / d.NH;
    const float *qp = tile.q, *kp = tile.k, *vp = tile.v;
    float* o = tile.out;
    const int64_t sbeg = first_key(d, b, t0) / kBc * kBc;  // 0 without position ids

    for (int64_t s0 = sbeg; s0 < kend; s0 += kBc) {
      const int64_t s1 = std::min(kend, s0 + kBc);
      const int64_t nc = s1 - s0;
      const bool first = s0 == sbeg;
      gemm_f32(false, true, nr, nc, hs, scale, qp, d.ldq, kp + s0 * d.ldk, d.ldk, 0.0f, S, kBc);
      for (int64_t r = 0; r < nr; ++r) {
        float* row = S + r * kBc;
        // Keys [lo, n) of the tile are visible to row t0 + r: from its document's start (0
        // without position ids) to itself, or all keys when bidirectional. Without position ids
        // the first key tile holds key 0, so every row has a visible key there and m, l start
        // finite; with them a row may have none yet (m stays -inf, its output row 0).
        const int64_t lo = std::clamp<int64_t>(first_key(d, b, t0 + r) - s0, 0, nc);
        const int64_t n = d.causal ? std::clamp<int64_t>(t0 + r + 1 - s0, 0, nc) : nc;
        if (lo >= n && (first || m[r] == -INFINITY)) {
          std::fill(row, row + nc, 0.0f);
          m[r] = -INFINITY;
          l[r] = 0.0f;
          continue;
        }
        const bool fresh = first || m[r] == -INFINITY;  // no visible key in the earlier tiles
        const float mx = detail::row_max(row + lo, n - lo, fresh ? -INFINITY : m[r]);
        const float sum = detail::exp_shifted(row + lo, row + lo, n - lo, mx);
        std::fill(row, row + lo, 0.0f);
        std::fill(row + n, row + nc, 0.0f);
        if (fresh) {
          l[r] = sum;
        } else if (mx != m[r]) {
          const float alpha = detail::fast_exp(m[r] - mx);
          l[r] = l[r] * alpha + sum;
          detail::scale_row(o + r * d.ldo, hs, alpha);
        } else {
          l[r] += sum;
        }
        m[r] = mx;
        if (d.dropout_p > 0) {
          // The sum above is the undropped one (lse as without dropout); v is weighted by the
          // dropped probabilities, from the mask regenerated by its counter.
          const float inv = static_cast<float>(1.0 / (1.0 - d.dropout_p));
          const int64_t h = tile.bh % d.NH;
          for (int64_t j = lo; j < n; ++j)
            row[j] =
                dropout_keep(d.dropout_key, dropout_index(d, b, h, t0 + r, s0 + j), d.dropout_p)
                    ? row[j] * inv
                    : 0.0f;
        }
      }
      gemm_f32(false, false, nr, hs, nc, 1.0f, S, kBc, vp + s0 * d.ldv, d.ldv, first ? 0.0f : 1.0f,
               o, d.ldo);
    }
    float* lrow = lse + tile.bh * T + t0;
    for (int64_t r = 0; r < nr; ++r) {
      detail::scale_row(o + r * d.ldo, hs, 1.0f / l[r]);
      lrow[r] = m[r] + std::log(l[r]);
    }
  }
}

void flash_attention_backward_gqa(float* dq, float* dk, float* dv, const float* dout,
                                  const float* q, const float* k, const float* v, const float* out,
                                  const float* lse, const AttentionDims& d) {
  check_attention_dims(d, "flash_attention");
  const int64_t T = d.T, hs = d.hs;
  const float scale = detail::attention_scale(d);
  // One job per (batch, kv head): it owns that head's dk and dv (kernels/attention_jobs.h).
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t bkv = 0; bkv < d.B * d.NKV; ++bkv) {
    float* P = thread_scratch(static_cast<size_t>(2 * kBr * kBc + 2 * kBr));
    float* dS = P + kBr * kBc;  // dP, then dS in place
    float* li = dS + kBr * kBc;
    float* Di = li + kBr;

    const detail::KvHeadJob job = detail::kv_head_job(d, bkv, k, v, dk, dv);
    const float *kp = job.k, *vp = job.v;
    float *dkp = job.dk, *dvp = job.dv;
    for (int64_t t = 0; t < T; ++t) {
      std::memset(dkp + t * d.ldk, 0, static_cast<size_t>(hs) * sizeof(float));
      std::memset(dvp + t * d.ldv, 0, static_cast<size_t>(hs) * sizeof(float));
    }

    for (int64_t qh = 0; qh < d.NH / d.NKV; ++qh) {
      const detail::QueryHeadOfJob head = detail::query_head_of(d, job, qh, q, dq, dout, out);
      const float* qp = head.q;
      float* dqp = head.dq;
      const float* dd = head.dout;
      const float* o = head.out;
      const float* lh = lse + (job.b * d.NH + head.h) * T;

      for (int64_t t0 = 0; t0 < T; t0 += kBr) {
        const int64_t t1 = std::min(T, t0 + kBr);
        const int64_t nr = t1 - t0;
        const int64_t kend = d.causal ? t1 : T;
        const int64_t sbeg = first_key(d, job.b, t0) / kBc * kBc;  // 0 without position ids
        for (int64_t r = 0; r < nr; ++r) {
          Di[r] = detail::row_dot(dd + (t0 + r) * d.ldo, o + (t0 + r) * d.ldo, hs);
          li[r] = lh[t0 + r];
        }
        for (int64_t s0 = sbeg; s0 < kend; s0 += kBc) {
          const int64_t s1 = std::min(kend, s0 + kBc);
          const int64_t nc = s1 - s0;
          // P = exp(scale Q_i K_j^T - lse_i), 0 where masked.
          gemm_f32(false, true, nr, nc, hs, scale, qp + t0 * d.ldq, d.ldq, kp + s0 * d.ldk, d.ldk,
                   0.0f, P, kBc);
          for (int64_t r = 0; r < nr; ++r) {
            float* row = P + r * kBc;
            const int64_t lo = std::clamp<int64_t>(first_key(d, job.b, t0 + r) - s0, 0, nc);
            const int64_t n = d.causal ? std::clamp<int64_t>(t0 + r + 1 - s0, 0, nc) : nc;
            const float lr = li[r];
            std::fill(row, row + lo, 0.0f);
#pragma omp simd
            for (int64_t j = lo; j < n; ++j) row[j] = detail::fast_exp(row[j] - lr);
            std::fill(row + n, row + nc, 0.0f);
          }
          const bool drop = d.dropout_p > 0;
          const float inv = drop ? static_cast<float>(1.0 / (1.0 - d.dropout_p)) : 1.0f;
          // The dropout mask of score (t0 + r, s0 + j), regenerated from its counter.
          auto keep = [&](int64_t r, int64_t j) {
            return dropout_keep(d.dropout_key, dropout_index(d, job.b, head.h, t0 + r, s0 + j),
                                d.dropout_p);
          };
          if (drop) {
            // dV_j += Pd^T dO_i with the dropped probabilities Pd (built in dS's scratch).
            for (int64_t r = 0; r < nr; ++r)
              for (int64_t j = 0; j < nc; ++j)
                dS[r * kBc + j] = keep(r, j) ? P[r * kBc + j] * inv : 0.0f;
            gemm_f32(true, false, nc, hs, nr, 1.0f, dS, kBc, dd + t0 * d.ldo, d.ldo, 1.0f,
                     dvp + s0 * d.ldv, d.ldv);
          } else {
            // dV_j += P^T dO_i.
            gemm_f32(true, false, nc, hs, nr, 1.0f, P, kBc, dd + t0 * d.ldo, d.ldo, 1.0f,
                     dvp + s0 * d.ldv, d.ldv);
          }
          // dP = dO_i V_j^T (through the mask with dropout); dS = scale * P * (dP - D_i).
          gemm_f32(false, true, nr, nc, hs, 1.0f, dd + t0 * d.ldo, d.ldo, vp + s0 * d.ldv, d.ldv,
                   0.0f, dS, kBc);
          if (drop)
            for (int64_t r = 0; r < nr; ++r)
              for (int64_t j = 0; j < nc; ++j)
                dS[r * kBc + j] = keep(r, j) ? dS[r * kBc + j] * inv : 0.0f;
          for (int64_t r = 0; r < nr; ++r) {
            const float* prow = P + r * kBc;
            float* srow = dS + r * kBc;
            const float Dr = Di[r];
#pragma omp simd
            for (int64_t j = 0; j < nc; ++j) srow[j] = scale * prow[j] * (srow[j] - Dr);
          }
          // dQ_i += dS K_j (the first key tile overwrites); dK_j += dS^T Q_i.
          gemm_f32(false, false, nr, hs, nc, 1.0f, dS, kBc, kp + s0 * d.ldk, d.ldk,
                   s0 == sbeg ? 0.0f : 1.0f, dqp + t0 * d.ldq, d.ldq);
          gemm_f32(true, false, nc, hs, nr, 1.0f, dS, kBc, qp + t0 * d.ldq, d.ldq, 1.0f,
                   dkp + s0 * d.ldk, d.ldk);
        }
      }
    }
  }
}

// The fused-qkv entry points are in attention.cpp (kernels/fused_attention.inc).

}  // namespace snug::kernels

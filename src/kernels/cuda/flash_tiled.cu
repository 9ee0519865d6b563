// The tiled flash attention (FlashAttention-2 style) behind kernels/flash_ops.inc: the default
// variant of flash.cu (kernels/cuda/flash_variant.h), same contracts and masks as the simple
// kernels there, fp32 FMAs on the CUDA cores (no TF32), no atomics: bit-identical run to run.
//
// Work split. A block of 256 threads (16 x 16 slots (ty, tx), laid over the lanes as
// kernels/cuda/flash_lanes.h says: "rows" for the "tiled" variant, "pairs" for "tiled-pairs")
// owns a 64-row tile:
//   forward  query tile of (b, h): K/V tiles of 64 keys staged in shared memory and used by all
//            64 rows; thread (ty, tx) computes the scores of rows ty + 16i and keys tx + 16j
//            (i, j < 4: a 4 x 4 register tile), the row's max and sum over the 16 threads of the
//            row by shuffles (online softmax), writes p to a shared 64 x 64 tile, then adds p v
//            to its outputs: rows ty + 16i, dims 4tx + 64j .. + 3 (float4 registers);
//   dq       query tile of (b, h): q and dout tiles resident, K/V tiles streamed; s = q k^T and
//            dp = dout v^T as register tiles, ds to shared memory, dq += ds k;
//   dk, dv   key tile of (b, kh): k and v tiles resident, q and dout tiles of every query head
//            of kh streamed; s^T and dp^T as register tiles, dv += p^T dout, dk += ds^T q.
// D = rowsum(dout * out) is computed once per row first (row_dot_kernel) into a device scratch
// buffer of B*NH*T floats (cuda::Scratch: device memory outside the pool, 0.75 MiB at GPT-2's
// B=16, T=1024), read by both backward kernels. Key tiles outside a tile's visible range
// (causal, window, documents) are skipped: the loops run over [first visible key of the tile's
// first row, last visible key of its last row]. Head sizes up to 128 run tiled (shared memory:
// 71 KiB forward, 88 KiB dq, 109 KiB dk/dv at hs = 64), where the GPU lets a block opt into that
// much; other cases take the simple kernels.
//
// Cost at GPT-2-124M, B=16, T=1024 (NH=12, hs=64, 12 layers, causal), per training step:
//   FLOPs: one masked T x T x hs product per (b, h) is 2 T^2 hs / 2 = 67.1 MFLOP, x B*NH = 192:
//   12.9 GFLOP per product and layer. Forward 2 products (q k^T, p v), backward 5 minimal
//   (q k^T, dout v^T, p^T dout, ds k, ds^T q): 7 x 12.9 x 12 = 1.08 TFLOP; as computed here
//   the backward's two kernels each recompute q k^T and dout v^T: 9 products, 1.39 TFLOP.
//   Bytes (minimal): per layer, forward reads q, k, v (3 x 50.3 MB) and writes out (50.3 MB) and
//   lse (0.8 MB); backward reads q, k, v, out, dout, lse (252 MB) and writes dq, dk, dv (151 MB):
//   about 0.61 GB per layer, 7.3 GB per step: 2.2 ms at an H100's 3.35 TB/s, 1.5 ms at an
//   H200's 4.8 TB/s. Compute-bound: at the fp32 FMA peak of about 60 TFLOP/s, 1.39 TFLOP take
//   23 ms. Measured on an H200 (CudaFlash.DISABLED_TimeGpt2Layer, one layer): forward 1.39 ms
//   (18.5 TFLOP/s), backward 3.75 ms (24 TFLOP/s over 7 products), so 62 ms a step. Tile loads
//   were the limit before (2.38 and 7.90 ms): an element-wise load-then-store loop waits one L2
//   round trip per element; aligned operands now take 16-byte cp.async copies, all in flight at
//   once. Overlapping the next tile's copies with this tile's products (one buffer per operand)
//   was measured too and gained nothing (1.38 / 3.74 ms): two blocks an SM already hide the wait.
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "core/error.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/flash_lanes.h"

namespace snug::cuda {

namespace {

using namespace dev;

constexpr int kTile = 64;                       // query rows and key rows per tile
constexpr int kTileThreads = kTileSlotThreads;  // 16 x 16 slots (flash_lanes.h)
constexpr int kLdp = 80;     // row stride of 64 x 64 score tiles: rows ty, ty + 1 16 banks apart
constexpr int kMaxHp = 128;  // head sizes (rounded up to 4) up to this run tiled

// Row stride of a 64 x hp operand tile: ld / 4 odd, so the 8 threads of a 128-bit load phase,
// reading 8 consecutive rows at one column, hit 8 different bank quads.
int tile_ld(int hp) {
  return (hp / 4) % 2 == 0 ? hp + 4 : hp + 8;
}

__device__ inline float4 ld4(const float* p) {
  return *reinterpret_cast<const float4*>(p);
}
__device__ inline float comp(const float4& v, int e) {
  return e == 0 ? v.x : (e == 1 ? v.y : (e == 2 ? v.z : v.w));
}

// Reductions over the 16 threads of a row (one warp's, flash_lanes.h), pairing tx bits 3, 2, 1, 0
// in that order in either layout; every thread of the row ends with the same bits. All 32 lanes
// must call them (no divergent branch around).
__device__ inline float max16(float v, FlashLanes lanes) {
  for (int bit = 3; bit >= 0; --bit)
    v = fmaxf(v, __shfl_xor_sync(kFull, v, static_cast<int>(row_lane_mask(bit, lanes))));
  return v;
}
__device__ inline float sum16(float v, FlashLanes lanes) {
  for (int bit = 3; bit >= 0; --bit)
    v += __shfl_xor_sync(kFull, v, static_cast<int>(row_lane_mask(bit, lanes)));
  return v;
}

// 16 bytes from global to shared memory without passing through registers (cp.async, sm_80 on):
// many copies are in flight at once, where a plain load-then-store loop waits one round trip to
// L2 per element. src_bytes 0 writes zeros and reads nothing (src must still be a valid address).
__device__ inline void copy16_async(float* dst, const float* src, int src_bytes) {
#if __CUDA_ARCH__ >= 800
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src),
               "r"(src_bytes));
#else
  *reinterpret_cast<float4*>(dst) =
      src_bytes ? *reinterpret_cast<const float4*>(src) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#endif
}
// Waits for this thread's copies; a __syncthreads() after it makes every thread's visible.
__device__ inline void copies_done() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// Rows r0 .. r0 + 63 of head `head` of x (row stride ldx) into dst (64 x ld), zero past T and
// past hs (up to hp), so padded rows and dims add nothing. r0 < T. Visible to the block after
// copies_done() and __syncthreads().
//   vec (tiles_aligned: hs = hp, rows 16-byte aligned): float4 idx = r * hp/4 + c of the tile by
//     thread idx % 256 as asynchronous copies, at most 8 a thread (hp <= 128);
//   otherwise: element idx = r * hp + c by thread idx % 256, loaded and stored one by one.
// (r, c) advance by (256 / n, 256 % n) for n elements a row: no division inside the loop.
__device__ inline void load_tile(float* dst, const float* x, int64_t ldx, const AttentionDims& d,
                                 int64_t b, int64_t r0, int64_t head, int hp, int ld, bool vec) {
  const float* x0 = x + (b * d.T + r0) * ldx + head * d.hs;
  const int rows = static_cast<int>(d.T - r0 < kTile ? d.T - r0 : kTile);
  const int hs = static_cast<int>(d.hs), n = vec ? hp / 4 : hp, w = vec ? 4 : 1;
  const int dr = kTileThreads / n, dc = kTileThreads % n;
  int r = static_cast<int>(threadIdx.x) / n, c = static_cast<int>(threadIdx.x) % n;
  while (r < kTile) {
    if (vec) {
      const bool in = r < rows;
      copy16_async(dst + r * ld + w * c, in ? x0 + r * ldx + w * c : x0, in ? 16 : 0);
    } else {
      dst[r * ld + c] = r < rows && c < hs ? x0[r * ldx + c] : 0.0f;
    }
    r += dr;
    c += dc;
    if (c >= n) {
      c -= n;
      ++r;
    }
  }
}

// s[i][j] = sum over dims < hp of a[ty + 16i][.] * bm[tx + 16j][.] (64 x ld tiles in shared
// memory), dims in order; (ty, tx) the thread's slot.
__device__ inline void tile_abt(float (&s)[4][4], const float* a, const float* bm, int hp, int ld,
                                TileSlot slot) {
  const int ty = slot.ty, tx = slot.tx;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) s[i][j] = 0.0f;
  for (int c = 0; c < hp; c += 4) {
    float4 av[4], bv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) av[i] = ld4(a + (ty + 16 * i) * ld + c);
#pragma unroll
    for (int j = 0; j < 4; ++j) bv[j] = ld4(bm + (tx + 16 * j) * ld + c);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float x = s[i][j];
        x = fmaf(av[i].x, bv[j].x, x);
        x = fmaf(av[i].y, bv[j].y, x);
        x = fmaf(av[i].z, bv[j].z, x);
        x = fmaf(av[i].w, bv[j].w, x);
        s[i][j] = x;
      }
  }
}

// acc[i][j] (row ty + 16i, dims 4tx + 64j .. + 3) += sum over the tile's 64 columns c of
// p[ty + 16i][c] * v[c][dims] (p 64 x kLdp, v 64 x ld in shared memory), c in order.
template <int NJ>
__device__ inline void tile_pv(float4 (&acc)[4][NJ], const float* p, const float* v, int hp, int ld,
                               TileSlot slot) {
  const int ty = slot.ty, tx = slot.tx;
  for (int c = 0; c < kTile; c += 4) {
    float4 pr[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) pr[i] = ld4(p + (ty + 16 * i) * kLdp + c);
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
      const int dd = 4 * tx + 64 * j;
      if (dd >= hp) continue;
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float4 vv = ld4(v + (c + e) * ld + dd);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float pe = comp(pr[i], e);
          acc[i][j].x = fmaf(pe, vv.x, acc[i][j].x);
          acc[i][j].y = fmaf(pe, vv.y, acc[i][j].y);
          acc[i][j].z = fmaf(pe, vv.z, acc[i][j].z);
          acc[i][j].w = fmaf(pe, vv.w, acc[i][j].w);
        }
      }
    }
  }
}

template <int NJ>
__device__ inline void zero(float4 (&acc)[4][NJ]) {
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < NJ; ++j) acc[i][j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// Row t of head `head` of y (row stride ldy) = the dims of `a` of the thread at column tx
// (4tx + 64j ..) / div, dims below hs.
template <int NJ>
__device__ inline void store_row(float* y, int64_t ldy, const AttentionDims& d, int64_t b,
                                 int64_t t, int64_t head, int tx, const float4 (&a)[NJ],
                                 float div) {
  float* yr = y + (b * d.T + t) * ldy + head * d.hs;
#pragma unroll
  for (int j = 0; j < NJ; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int dd = 4 * tx + 64 * j + e;
      if (dd < d.hs) yr[dd] = comp(a[j], e) / div;
    }
}

// Shared memory: q tile, k tile, v tile (64 x ld each), p tile (64 x kLdp).
template <int NJ>
__global__ void __launch_bounds__(kTileThreads)
    tiled_forward_kernel(float* out, float* lse, const float* q, const float* k, const float* v,
                         AttentionDims d, float scale, int hp, int ld, bool vec, FlashLanes lanes) {
  extern __shared__ float4 smem4[];
  float* qs = reinterpret_cast<float*>(smem4);
  float* ks = qs + kTile * ld;
  float* vs = ks + kTile * ld;
  float* ps = vs + kTile * ld;
  const int64_t BH = d.B * d.NH, ntiles = (d.T + kTile - 1) / kTile;
  // The longest (last) query tiles first: the causal work per tile grows with t.
  const int64_t bh = blockIdx.x % BH, qt = ntiles - 1 - blockIdx.x / BH;
  const int64_t b = bh / d.NH, h = bh % d.NH, kh = h / (d.NH / d.NKV), t0 = qt * kTile;
  const TileSlot slot = tile_slot(static_cast<int>(threadIdx.x), lanes);
  const int ty = slot.ty, tx = slot.tx;
  load_tile(qs, q, d.ldq, d, b, t0, h, hp, ld, vec);
  int64_t lo[4], n[4];  // keys [lo, n) visible to row i; empty past T
  float m[4], l[4];
  float4 acc[4][NJ];
  zero(acc);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t t = t0 + ty + 16 * i;
    lo[i] = t < d.T ? visible_from(d, b, t) : 0;
    n[i] = t < d.T ? key_end(d, t) : 0;
    m[i] = -INFINITY;
    l[i] = 0.0f;
  }
  const int64_t t_last = (t0 + kTile < d.T ? t0 + kTile : d.T) - 1;
  const int64_t kb = visible_from(d, b, t0), ke = key_end(d, t_last);
  for (int64_t s0 = kb; s0 < ke; s0 += kTile) {
    __syncthreads();  // the previous tile's ks, vs, ps are read
    load_tile(ks, k, d.ldk, d, b, s0, kh, hp, ld, vec);
    load_tile(vs, v, d.ldv, d, b, s0, kh, hp, ld, vec);
    copies_done();
    __syncthreads();
    float s[4][4];
    tile_abt(s, qs, ks, hp, ld, slot);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t key = s0 + tx + 16 * j;
        s[i][j] = key >= lo[i] && key < n[i] ? s[i][j] * scale : -INFINITY;
        mx = fmaxf(mx, s[i][j]);
      }
      const float m_new = fmaxf(m[i], max16(mx, lanes));
      const bool any = m_new != -INFINITY;  // a visible key so far (same on the row's 16 lanes)
      const float corr = any ? expf(m[i] - m_new) : 1.0f;  // 0 while m was -inf
      float p[4], sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        p[j] = any ? expf(s[i][j] - m_new) : 0.0f;  // masked: exp(-inf) = 0
        sum += p[j];
      }
      l[i] = l[i] * corr + sum16(sum, lanes);
      m[i] = m_new;
#pragma unroll
      for (int j = 0; j < NJ; ++j) {
        acc[i][j].x *= corr;
        acc[i][j].y *= corr;
        acc[i][j].z *= corr;
        acc[i][j].w *= corr;
      }
      const int64_t t = t0 + ty + 16 * i;
#pragma unroll
      for (int j = 0; j < 4; ++j)
        ps[(ty + 16 * i) * kLdp + tx + 16 * j] =
            p[j] != 0.0f ? p[j] * keep_scale(d, b, h, t, s0 + tx + 16 * j) : 0.0f;
    }
    __syncthreads();
    tile_pv<NJ>(acc, ps, vs, hp, ld, slot);
  }
  copies_done();  // a tile with no visible key still issued its q copies
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t t = t0 + ty + 16 * i;
    if (t >= d.T) continue;
    store_row(out, d.ldo, d, b, t, h, tx, acc[i], l[i]);
    if (tx == 0) lse[(b * d.NH + h) * d.T + t] = m[i] + logf(l[i]);
  }
}

// D = dout . out per row (b*NH + h)*T + t: one warp per row, as the simple dq kernel sums it.
__global__ void row_dot_kernel(float* dsum, const float* dout, const float* out, AttentionDims d) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + warp;
  if (row >= d.B * d.NH * d.T) return;
  const int64_t t = row % d.T, h = (row / d.T) % d.NH, b = row / (d.T * d.NH);
  const float* dr = head_row(dout, d.ldo, d, b, t, h);
  const float* orow = head_row(out, d.ldo, d, b, t, h);
  float part = 0.0f;
  for (int64_t i = lane; i < d.hs; i += 32) part += dr[i] * orow[i];
  const float D = warp_sum(part);
  if (lane == 0) dsum[row] = D;
}

// Shared memory: q tile, dout tile, k tile, v tile (64 x ld each), ds tile (64 x kLdp).
template <int NJ>
__global__ void __launch_bounds__(kTileThreads)
    tiled_dq_kernel(float* dq, const float* dout, const float* q, const float* k, const float* v,
                    const float* lse, const float* dsum, AttentionDims d, float scale, int hp,
                    int ld, bool vec, FlashLanes lanes) {
  extern __shared__ float4 smem4[];
  float* qs = reinterpret_cast<float*>(smem4);
  float* dos = qs + kTile * ld;
  float* ks = dos + kTile * ld;
  float* vs = ks + kTile * ld;
  float* gs = vs + kTile * ld;
  const int64_t BH = d.B * d.NH, ntiles = (d.T + kTile - 1) / kTile;
  const int64_t bh = blockIdx.x % BH, qt = ntiles - 1 - blockIdx.x / BH;
  const int64_t b = bh / d.NH, h = bh % d.NH, kh = h / (d.NH / d.NKV), t0 = qt * kTile;
  const TileSlot slot = tile_slot(static_cast<int>(threadIdx.x), lanes);
  const int ty = slot.ty, tx = slot.tx;
  load_tile(qs, q, d.ldq, d, b, t0, h, hp, ld, vec);
  load_tile(dos, dout, d.ldo, d, b, t0, h, hp, ld, vec);
  int64_t lo[4], n[4];
  float L[4], D[4];
  float4 acc[4][NJ];
  zero(acc);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t t = t0 + ty + 16 * i, row = (b * d.NH + h) * d.T + t;
    lo[i] = t < d.T ? visible_from(d, b, t) : 0;
    n[i] = t < d.T ? key_end(d, t) : 0;
    L[i] = t < d.T ? lse[row] : 0.0f;
    D[i] = t < d.T ? dsum[row] : 0.0f;
  }
  const int64_t t_last = (t0 + kTile < d.T ? t0 + kTile : d.T) - 1;
  const int64_t kb = visible_from(d, b, t0), ke = key_end(d, t_last);
  for (int64_t s0 = kb; s0 < ke; s0 += kTile) {
    __syncthreads();  // the previous tile's ks, vs, gs are read
    load_tile(ks, k, d.ldk, d, b, s0, kh, hp, ld, vec);
    load_tile(vs, v, d.ldv, d, b, s0, kh, hp, ld, vec);
    copies_done();
    __syncthreads();
    float s[4][4], dp[4][4];
    tile_abt(s, qs, ks, hp, ld, slot);
    tile_abt(dp, dos, vs, hp, ld, slot);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t t = t0 + ty + 16 * i;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t key = s0 + tx + 16 * j;
        float g = 0.0f;
        if (key >= lo[i] && key < n[i]) {
          const float p = expf(s[i][j] * scale - L[i]);
          g = p * (dp[i][j] * keep_scale(d, b, h, t, key) - D[i]) * scale;
        }
        gs[(ty + 16 * i) * kLdp + tx + 16 * j] = g;
      }
    }
    __syncthreads();
    tile_pv<NJ>(acc, gs, ks, hp, ld, slot);
  }
  copies_done();
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t t = t0 + ty + 16 * i;
    if (t < d.T) store_row(dq, d.ldq, d, b, t, h, tx, acc[i], 1.0f);
  }
}

// Shared memory: k tile, v tile, q tile, dout tile (64 x ld each), p^T and ds^T tiles
// (64 x kLdp each), then the query tile's lse, D (64 floats each) and first visible keys (64
// int64).
// hs <= 64 (NJ = 1): two blocks an SM (122 registers, no spills; 180 when unbounded, one block).
template <int NJ>
__global__ void __launch_bounds__(kTileThreads, NJ == 1 ? 2 : 1)
    tiled_dkv_kernel(float* dk, float* dv, const float* dout, const float* q, const float* k,
                     const float* v, const float* lse, const float* dsum, AttentionDims d,
                     float scale, int hp, int ld, bool vec, FlashLanes lanes) {
  extern __shared__ float4 smem4[];
  float* ks = reinterpret_cast<float*>(smem4);
  float* vs = ks + kTile * ld;
  float* qs = vs + kTile * ld;
  float* dos = qs + kTile * ld;
  float* pt = dos + kTile * ld;
  float* gt = pt + kTile * kLdp;
  float* ls = gt + kTile * kLdp;
  float* dl = ls + kTile;
  int64_t* los = reinterpret_cast<int64_t*>(dl + kTile);  // offset a multiple of 4 floats
  const int64_t BKV = d.B * d.NKV, rep = d.NH / d.NKV;
  // The first key tiles first: causal, they are read by the most query rows.
  const int64_t bkv = blockIdx.x % BKV, s0 = (blockIdx.x / BKV) * kTile;
  const int64_t b = bkv / d.NKV, kh = bkv % d.NKV;
  const TileSlot slot = tile_slot(static_cast<int>(threadIdx.x), lanes);
  const int ty = slot.ty, tx = slot.tx;
  load_tile(ks, k, d.ldk, d, b, s0, kh, hp, ld, vec);
  load_tile(vs, v, d.ldv, d, b, s0, kh, hp, ld, vec);
  float4 gk[4][NJ], gv[4][NJ];
  zero(gk);
  zero(gv);
  const int64_t s_last = (s0 + kTile < d.T ? s0 + kTile : d.T) - 1;
  const int64_t tb = query_begin(d, s0), te = query_end(d, b, s_last);
  for (int64_t h = kh * rep; h < (kh + 1) * rep; ++h)
    for (int64_t t0 = tb; t0 < te; t0 += kTile) {
      __syncthreads();  // the previous tile's qs, dos, pt, gt, ls, dl, los are read
      load_tile(qs, q, d.ldq, d, b, t0, h, hp, ld, vec);
      load_tile(dos, dout, d.ldo, d, b, t0, h, hp, ld, vec);
      if (threadIdx.x < kTile) {
        const int64_t t = t0 + threadIdx.x, row = (b * d.NH + h) * d.T + t;
        ls[threadIdx.x] = t < d.T ? lse[row] : 0.0f;
        dl[threadIdx.x] = t < d.T ? dsum[row] : 0.0f;
        los[threadIdx.x] = t < d.T ? visible_from(d, b, t) : d.T;  // past T: no key visible
      }
      copies_done();
      __syncthreads();
      float st[4][4], dpt[4][4];  // rows: keys s0 + ty + 16i; columns: queries t0 + tx + 16j
      tile_abt(st, ks, qs, hp, ld, slot);
      tile_abt(dpt, vs, dos, hp, ld, slot);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t s = s0 + ty + 16 * i;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int c = tx + 16 * j;
          const int64_t t = t0 + c;
          float pv = 0.0f, g = 0.0f;
          if (s < d.T && t < d.T && s >= los[c] && s < key_end(d, t)) {
            const float p = expf(st[i][j] * scale - ls[c]);
            const float mk = keep_scale(d, b, h, t, s);
            pv = p * mk;
            g = p * (dpt[i][j] * mk - dl[c]) * scale;
          }
          pt[(ty + 16 * i) * kLdp + c] = pv;
          gt[(ty + 16 * i) * kLdp + c] = g;
        }
      }
      __syncthreads();
      tile_pv<NJ>(gv, pt, dos, hp, ld, slot);
      tile_pv<NJ>(gk, gt, qs, hp, ld, slot);
    }
  copies_done();
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t s = s0 + ty + 16 * i;
    if (s >= d.T) continue;
    store_row(dk, d.ldk, d, b, s, kh, tx, gk[i], 1.0f);
    store_row(dv, d.ldv, d, b, s, kh, tx, gv[i], 1.0f);
  }
}

size_t forward_smem(int ld) {
  return (3 * kTile * ld + kTile * kLdp) * sizeof(float);
}
size_t dq_smem(int ld) {
  return (4 * kTile * ld + kTile * kLdp) * sizeof(float);
}
size_t dkv_smem(int ld) {
  return (4 * kTile * ld + 2 * kTile * kLdp + 2 * kTile) * sizeof(float) + kTile * sizeof(int64_t);
}

// The shared memory a block may opt into on the current GPU.
size_t smem_optin() {
  int dev = 0, bytes = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
        "cudaDeviceGetAttribute(shared memory per block)");
  return static_cast<size_t>(bytes);
}

template <typename Kernel>
void allow_smem(Kernel kernel, size_t bytes) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(bytes)),
        "cudaFuncSetAttribute(flash attention shared memory)");
}

float tiled_scale(const AttentionDims& d) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.hs)));
}

// Whether every operand tile row starts on 16 bytes and holds whole float4s (hs % 4 == 0), so
// load_tile may copy float4s asynchronously. GPT-2's fused qkv (row stride 3C) and out (C) are.
bool tiles_aligned(const AttentionDims& d, std::initializer_list<const float*> ptrs) {
  bool ok = d.hs % 4 == 0 && d.ldq % 4 == 0 && d.ldk % 4 == 0 && d.ldv % 4 == 0 && d.ldo % 4 == 0;
  for (const float* p : ptrs) ok = ok && reinterpret_cast<uintptr_t>(p) % 16 == 0;
  return ok;
}

unsigned tile_grid(int64_t heads, int64_t T) {
  return static_cast<unsigned>(heads * ((T + kTile - 1) / kTile));
}

template <int NJ>
void launch_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                    const AttentionDims& d, int hp, int ld, FlashLanes lanes) {
  const size_t bytes = forward_smem(ld);
  allow_smem(tiled_forward_kernel<NJ>, bytes);
  const unsigned grid = tile_grid(d.B * d.NH, d.T);
  const bool vec = tiles_aligned(d, {q, k, v});
  tiled_forward_kernel<NJ><<<grid, kTileThreads, bytes, stream()>>>(
      out, lse, q, k, v, d, tiled_scale(d), hp, ld, vec, lanes);
  check_launch("flash_attention_forward (tiled)");
}

template <int NJ>
void launch_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                     const float* k, const float* v, const float* lse, const float* dsum,
                     const AttentionDims& d, int hp, int ld, FlashLanes lanes) {
  const float scale = tiled_scale(d);
  const size_t qbytes = dq_smem(ld), kvbytes = dkv_smem(ld);
  allow_smem(tiled_dq_kernel<NJ>, qbytes);
  allow_smem(tiled_dkv_kernel<NJ>, kvbytes);
  const unsigned qgrid = tile_grid(d.B * d.NH, d.T), kvgrid = tile_grid(d.B * d.NKV, d.T);
  const bool vec = tiles_aligned(d, {dout, q, k, v});
  tiled_dq_kernel<NJ><<<qgrid, kTileThreads, qbytes, stream()>>>(dq, dout, q, k, v, lse, dsum, d,
                                                                 scale, hp, ld, vec, lanes);
  check_launch("flash_attention_backward (tiled dq)");
  tiled_dkv_kernel<NJ><<<kvgrid, kTileThreads, kvbytes, stream()>>>(
      dk, dv, dout, q, k, v, lse, dsum, d, scale, hp, ld, vec, lanes);
  check_launch("flash_attention_backward (tiled dk, dv)");
}

}  // namespace

bool tiled_flash_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                         const AttentionDims& d, FlashLanes lanes) {
  const int hp = static_cast<int>(padded_hs(d.hs));
  if (d.hs > kMaxHp) return false;
  const int ld = tile_ld(hp);
  if (forward_smem(ld) > smem_optin()) return false;
  if (hp <= 64)
    launch_forward<1>(out, lse, q, k, v, d, hp, ld, lanes);
  else
    launch_forward<2>(out, lse, q, k, v, d, hp, ld, lanes);
  return true;
}

bool tiled_flash_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                          const float* k, const float* v, const float* out, const float* lse,
                          const AttentionDims& d, FlashLanes lanes) {
  if (d.hs > kMaxHp) return false;
  const int hp = static_cast<int>(padded_hs(d.hs)), ld = tile_ld(hp);
  if (dkv_smem(ld) > smem_optin()) return false;  // the larger of the two
  const int64_t rows = d.B * d.NH * d.T;
  Scratch dsum(static_cast<size_t>(rows) * sizeof(float));
  row_dot_kernel<<<blocks_for_rows(rows), kThreads, 0, stream()>>>(dsum.as<float>(), dout, out, d);
  check_launch("flash_attention_backward (tiled D)");
  if (hp <= 64)
    launch_backward<1>(dq, dk, dv, dout, q, k, v, lse, dsum.as<float>(), d, hp, ld, lanes);
  else
    launch_backward<2>(dq, dk, dv, dout, q, k, v, lse, dsum.as<float>(), d, hp, ld, lanes);
  return true;
}

}  // namespace snug::cuda

// What the CUDA attention kernels (flash.cu, attention.cu) share: the host-side check of an
// AttentionDims whose pointers are on the device, the masks of kernels/attention_dims.h and the
// dropout hash of kernels/dropout_mask.h as device functions (same formulas, so the same keys
// and the same kept probabilities as the CPU), and warp reductions.
//
// Work split of every attention kernel here: one warp per query row (b, h, t) or per key row
// (b, kh, s), the head's dims spread over the lanes (lane owns dims lane, lane + 32, ...), keys or
// queries taken 32 at a time (one per lane) for the dot products. Every output element is written
// by one warp in a fixed order: no atomics, bit-identical results run to run.
#pragma once

#include <cstdint>

#include "kernels/attention_dims.h"
#include "kernels/cuda/context.cuh"
#include "kernels/cuda/flash_lanes.h"
#include "kernels/dropout_mask.h"

namespace snug::cuda {

// check_attention_dims without reading the position ids (they are on the device; models check
// their host input with check_position_ids before any op runs).
void check_device_attention_dims(const AttentionDims& d, const char* what);

// flash.cu's general kernels, wrapped by the fused-qkv entry points in attention.cu.
void flash_attention_forward_gqa(float* out, float* lse, const float* q, const float* k,
                                 const float* v, const AttentionDims& d);
void flash_attention_backward_gqa(float* dq, float* dk, float* dv, const float* dout,
                                  const float* q, const float* k, const float* v, const float* out,
                                  const float* lse, const AttentionDims& d);
// flash_tiled.cu's kernels behind those two, with the threads laid out as `lanes` says
// (flash_lanes.h): false, with nothing launched, where the case is outside them (head size,
// shared memory); the caller then runs the simple kernels. The backward allocates B*NH*T floats
// of device scratch outside the pool (cuda::Scratch) for the call.
bool tiled_flash_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                         const AttentionDims& d, FlashLanes lanes);
bool tiled_flash_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                          const float* k, const float* v, const float* out, const float* lse,
                          const AttentionDims& d, FlashLanes lanes);

namespace dev {

constexpr int kWarpsPerBlock = 4;

// A head's row in shared memory: hs floats rounded up to 4, so that 16-byte loads (the tiled
// kernels' float4s, ptxas's widened loads in the simple ones) stay inside their row.
__host__ __device__ constexpr int64_t padded_hs(int64_t hs) {
  return (hs + 3) & ~int64_t{3};
}
constexpr int kThreads = 32 * kWarpsPerBlock;
constexpr unsigned kFull = 0xffffffffu;

// Butterfly reductions: every lane ends with the same value (addition is commutative in IEEE).
__device__ inline float warp_sum(float v) {
  for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(kFull, v, m);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, __shfl_xor_sync(kFull, v, m));
  return v;
}

// kernels/attention_dims.h's first_key: keys [visible_from, key_end) are visible to query row t.
__device__ inline int64_t visible_from(const AttentionDims& d, int64_t b, int64_t t) {
  const int64_t doc = d.pos ? t - d.pos[b * d.T + t] : 0;
  return d.window > 0 && t - d.window + 1 > doc ? t - d.window + 1 : doc;
}
__device__ inline int64_t key_end(const AttentionDims& d, int64_t t) {
  return d.causal ? t + 1 : d.T;
}
// The query rows that see key s: [query_begin, query_end). Causal: from s on while visible_from(t)
// <= s (visible_from is non-decreasing in t, so a binary search); bidirectional: every row.
__device__ inline int64_t query_begin(const AttentionDims& d, int64_t s) {
  return d.causal ? s : 0;
}
__device__ inline int64_t query_end(const AttentionDims& d, int64_t b, int64_t s) {
  if (!d.causal) return d.T;
  int64_t lo = s + 1,
          hi = d.T;  // visible_from(s) <= s always; find the first t with visible_from > s
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (visible_from(d, b, mid) <= s)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

__device__ inline bool keep(const AttentionDims& d, int64_t b, int64_t h, int64_t t, int64_t s) {
  return kernels::dropout_keep(d.dropout_key, ((b * d.NH + h) * d.T + t) * d.T + s, d.dropout_p);
}
// 1/(1-p) when score (b,h,t,s) is kept, 0 when dropped; 1 without dropout.
__device__ inline float keep_scale(const AttentionDims& d, int64_t b, int64_t h, int64_t t,
                                   int64_t s) {
  if (d.dropout_p <= 0) return 1.0f;
  return keep(d, b, h, t, s) ? static_cast<float>(1.0 / (1.0 - d.dropout_p)) : 0.0f;
}

// Row t of batch b, head `head` of an operand with row stride ld.
template <typename T>
__device__ inline T* head_row(T* x, int64_t ld, const AttentionDims& d, int64_t b, int64_t t,
                              int64_t head) {
  return x + (b * d.T + t) * ld + head * d.hs;
}

// a . b over n floats, one lane, in order.
__device__ inline float dot(const float* a, const float* b, int64_t n) {
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

}  // namespace dev

// Blocks for `rows` warps of work.
inline unsigned blocks_for_rows(int64_t rows) {
  return blocks_for(rows, dev::kWarpsPerBlock);
}

}  // namespace snug::cuda

// The KV cache of generation on the GPU (kernels/kv_cache_ops.inc): writes, beam reorders and the
// cached attention, on fp32 or 16-bit (f16/bf16, half_bits.cuh's conversions) caches.
//
// attention_decode_gqa: one block of kWarps warps per (b, h, t) query row. Each lane holds the
// query's dims lane, lane + 32, ... (hs <= 32 * kDimsPerLane); warp w takes keys lo + w, lo + w +
// kWarps, ... with an online softmax in registers, the dot product summed by a fixed butterfly of
// shuffles; the warps' (max, sum, accumulator) are then merged in warp order. No atomics: two runs
// give the same bits.
#include "core/error.h"
#include "kernels/cuda/context.cuh"
#include "kernels/cuda/half_bits.cuh"

namespace snug::cuda {

namespace {

constexpr int kWarps = 4, kDimsPerLane = 8, kMaxHeadSize = 32 * kDimsPerLane;

struct F32Cache {
  const float* c;
  __device__ float operator()(int64_t i) const { return c[i]; }
};
struct HalfCache {
  const uint16_t* c;
  bool fp16;
  __device__ float operator()(int64_t i) const { return half_to_f32(c[i], fp16); }
};

// out(B,Tq,NH*hs): query t of batch b over keys [lo, past + t], lo = past + t + 1 - window when
// window > 0 (clamped at 0).
template <class Cache>
__global__ void decode_kernel(float* out, const float* q, Cache kc, Cache vc, int64_t Tq,
                              int64_t past, int64_t Tmax, int64_t NH, int64_t NKV, int64_t hs,
                              int64_t ldq, int64_t window, float scale) {
  __shared__ float sm_m[kWarps], sm_l[kWarps], sm_acc[kWarps][kMaxHeadSize];
  const int64_t row = blockIdx.x;  // (b, h, t)
  const int64_t t = row % Tq, h = (row / Tq) % NH, b = row / (Tq * NH);
  const int64_t W = NKV * hs, kh = h / (NH / NKV), n = past + t + 1;
  const int64_t lo = window > 0 && n > window ? n - window : 0;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  const float* qr = q + (b * Tq + t) * ldq + h * hs;
  float qv[kDimsPerLane], acc[kDimsPerLane];
#pragma unroll
  for (int j = 0; j < kDimsPerLane; ++j) {
    const int64_t i = lane + 32 * j;
    qv[j] = i < hs ? qr[i] : 0.0f;
    acc[j] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int64_t s = lo + warp; s < n; s += kWarps) {
    const int64_t at = (b * Tmax + s) * W + kh * hs;
    float part = 0.0f;
#pragma unroll
    for (int j = 0; j < kDimsPerLane; ++j) {
      const int64_t i = lane + 32 * j;
      if (i < hs) part += qv[j] * kc(at + i);
    }
    for (int o = 16; o > 0; o /= 2) part += __shfl_xor_sync(0xffffffffu, part, o);
    const float p = part * scale;
    const float m_new = fmaxf(m, p);
    const float corr = expf(m - m_new), e = expf(p - m_new);
    l = l * corr + e;
#pragma unroll
    for (int j = 0; j < kDimsPerLane; ++j) {
      const int64_t i = lane + 32 * j;
      if (i < hs) acc[j] = acc[j] * corr + e * vc(at + i);
    }
    m = m_new;
  }
  if (lane == 0) {
    sm_m[warp] = m;
    sm_l[warp] = l;
  }
#pragma unroll
  for (int j = 0; j < kDimsPerLane; ++j) {
    const int64_t i = lane + 32 * j;
    if (i < hs) sm_acc[warp][i] = acc[j];
  }
  __syncthreads();
  float M = -INFINITY;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sm_m[w]);
  float L = 0.0f;
  for (int w = 0; w < kWarps; ++w) L += sm_l[w] * expf(sm_m[w] - M);  // a warp with no key: 0
  float* o = out + (b * Tq + t) * NH * hs + h * hs;
  for (int64_t i = threadIdx.x; i < hs; i += blockDim.x) {
    float v = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (sm_l[w] > 0.0f) v += sm_acc[w][i] * expf(sm_m[w] - M);
    o[i] = v / L;
  }
}

// cache[b, past + t, :] = convert(src[b, t, 0:W]) (row stride lds).
template <class T, class Convert>
__global__ void write_kernel(T* cache, const float* src, int64_t B, int64_t Tq, int64_t Tmax,
                             int64_t past, int64_t W, int64_t lds, Convert convert) {
  const int64_t total = B * Tq * W;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t bt = i / W, c = i % W, b = bt / Tq, t = bt % Tq;
    cache[(b * Tmax + past + t) * W + c] = convert(src[bt * lds + c]);
  }
}

struct Same {
  __device__ float operator()(float x) const { return x; }
};
struct ToHalf {
  bool fp16;
  __device__ uint16_t operator()(float x) const { return f32_to_half(x, fp16); }
};

// dst[b, t, :] = src[from[b], t, :] for t < len: rows [0, len) of a batch entry are contiguous.
template <class T>
__global__ void gather_kernel(T* dst, const T* src, const int32_t* from, int64_t B, int64_t Tmax,
                              int64_t len, int64_t W) {
  const int64_t per = len * W, total = B * per;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t b = i / per, r = i % per;
    dst[b * Tmax * W + r] = src[static_cast<int64_t>(from[b]) * Tmax * W + r];
  }
}

unsigned grid_for(int64_t n) {
  const unsigned b = blocks_for(n);
  return b > 8192 ? 8192 : b;
}

template <class Cache>
void decode(const char* what, float* out, const float* q, Cache kc, Cache vc, int64_t B, int64_t Tq,
            int64_t past, int64_t Tmax, int64_t NH, int64_t NKV, int64_t hs, int64_t ldq,
            int64_t window) {
  if (B <= 0 || Tq <= 0 || NH <= 0 || hs <= 0) return;
  SNUG_CHECK(hs <= kMaxHeadSize, what, ": head size ", hs, " is above the CUDA kernel's ",
             kMaxHeadSize);
  SNUG_CHECK(NKV > 0 && NH % NKV == 0, what, ": NH=", NH, " is not a multiple of NKV=", NKV);
  const int64_t rows = B * NH * Tq;
  SNUG_CHECK(rows <= 2147483647, what, ": ", rows, " query rows exceed the CUDA grid");
  const float scale = 1.0f / sqrtf(static_cast<float>(hs));
  decode_kernel<<<static_cast<unsigned>(rows), kWarps * 32, 0, stream()>>>(
      out, q, kc, vc, Tq, past, Tmax, NH, NKV, hs, ldq, window, scale);
  check_launch(what);
}

void kv_cache_write(float* cache, const float* src, int64_t B, int64_t Tq, int64_t Tmax,
                    int64_t past, int64_t W, int64_t lds) {
  if (B <= 0 || Tq <= 0 || W <= 0) return;
  write_kernel<<<grid_for(B * Tq * W), 256, 0, stream()>>>(cache, src, B, Tq, Tmax, past, W, lds,
                                                           Same{});
  check_launch("kv_cache_write");
}

void kv_cache_write_half(uint16_t* cache, const float* src, int64_t B, int64_t Tq, int64_t Tmax,
                         int64_t past, int64_t W, int64_t lds, bool fp16) {
  if (B <= 0 || Tq <= 0 || W <= 0) return;
  write_kernel<<<grid_for(B * Tq * W), 256, 0, stream()>>>(cache, src, B, Tq, Tmax, past, W, lds,
                                                           ToHalf{fp16});
  check_launch("kv_cache_write_half");
}

template <class T>
void gather(const char* what, T* dst, const T* src, const int32_t* from, int64_t B, int64_t Tmax,
            int64_t len, int64_t W) {
  if (B <= 0 || len <= 0 || W <= 0) return;
  gather_kernel<<<grid_for(B * len * W), 256, 0, stream()>>>(dst, src, from, B, Tmax, len, W);
  check_launch(what);
}

void kv_cache_gather(float* dst, const float* src, const int32_t* from, int64_t B, int64_t Tmax,
                     int64_t len, int64_t W) {
  gather("kv_cache_gather", dst, src, from, B, Tmax, len, W);
}

void kv_cache_gather_half(uint16_t* dst, const uint16_t* src, const int32_t* from, int64_t B,
                          int64_t Tmax, int64_t len, int64_t W) {
  gather("kv_cache_gather_half", dst, src, from, B, Tmax, len, W);
}

void attention_decode_gqa(float* out, const float* q, const float* kc, const float* vc, int64_t B,
                          int64_t Tq, int64_t past, int64_t Tmax, int64_t NH, int64_t NKV,
                          int64_t hs, int64_t ldq, int64_t window) {
  decode("attention_decode_gqa", out, q, F32Cache{kc}, F32Cache{vc}, B, Tq, past, Tmax, NH, NKV, hs,
         ldq, window);
}

void attention_decode_gqa_half(float* out, const float* q, const uint16_t* kc, const uint16_t* vc,
                               int64_t B, int64_t Tq, int64_t past, int64_t Tmax, int64_t NH,
                               int64_t NKV, int64_t hs, int64_t ldq, int64_t window, bool fp16) {
  decode("attention_decode_gqa_half", out, q, HalfCache{kc, fp16}, HalfCache{vc, fp16}, B, Tq, past,
         Tmax, NH, NKV, hs, ldq, window);
}

}  // namespace

void register_kv_cache(OpTable& t) {
  t.kv_cache_write = &kv_cache_write;
  t.kv_cache_gather = &kv_cache_gather;
  t.attention_decode_gqa = &attention_decode_gqa;
  t.kv_cache_write_half = &kv_cache_write_half;
  t.kv_cache_gather_half = &kv_cache_gather_half;
  t.attention_decode_gqa_half = &attention_decode_gqa_half;
}

}  // namespace snug::cuda

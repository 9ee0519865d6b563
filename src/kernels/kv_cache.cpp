// Fast KV-cache kernels (kernels/kv_cache_ops.inc). Decoding attention is memory-bound (each new
// query reads every cached key and value once), so the kernel is a single pass per (b, h, t)
// with an online softmax in registers of one row: parallel over batch x heads x queries. A 16-bit
// cache is read by the same loop, each cached row widened into a buffer of head_dim floats first.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "kernels/kv_cache_ops.h"
#include "kernels/lane_sum.h"

namespace snug::kernels {

namespace {

// Cached rows as fp32: the fp32 cache's own, or a 16-bit cache's widened into `buf`.
struct F32Rows {
  const float* c;
  const float* row(int64_t at, int64_t, float*) const { return c + at; }
};
struct HalfRows {
  const uint16_t* c;
  DType t;
  const float* row(int64_t at, int64_t n, float* buf) const {
    convert(c + at, t, buf, DType::f32, static_cast<size_t>(n));
    return buf;
  }
};

template <class Rows>
void decode(float* out, const float* q, const Rows& kc, const Rows& vc, int64_t B, int64_t Tq,
            int64_t past, int64_t Tmax, int64_t NH, int64_t NKV, int64_t hs, int64_t ldq,
            int64_t window) {
  const int64_t W = NKV * hs, group = NH / NKV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
  {
    std::vector<float> p(static_cast<size_t>(past + Tq));
    std::vector<float> buf(static_cast<size_t>(hs));
#pragma omp for collapse(3) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < NH; ++h)
        for (int64_t t = 0; t < Tq; ++t) {
          const int64_t kh = h / group, n = past + t + 1;
          const int64_t lo = window > 0 ? std::max<int64_t>(0, n - window) : 0;
          const float* qr = q + (b * Tq + t) * ldq + h * hs;
          float mx = -INFINITY;
          for (int64_t s = lo; s < n; ++s) {
            const float* kr = kc.row((b * Tmax + s) * W + kh * hs, hs, buf.data());
            const float dot = detail::lane_sum(hs, [&](int64_t i) { return qr[i] * kr[i]; });
            p[s] = dot * scale;
            mx = std::max(mx, p[s]);
          }
          float sum = 0.0f;
          for (int64_t s = lo; s < n; ++s) sum += p[s] = std::exp(p[s] - mx);
          const float inv = 1.0f / sum;
          float* o = out + (b * Tq + t) * NH * hs + h * hs;
          std::fill(o, o + hs, 0.0f);
          for (int64_t s = lo; s < n; ++s) {
            const float* vr = vc.row((b * Tmax + s) * W + kh * hs, hs, buf.data());
            const float w = p[s] * inv;
#pragma omp simd
            for (int64_t i = 0; i < hs; ++i) o[i] += w * vr[i];
          }
        }
  }
}

template <class T>
void gather(T* dst, const T* src, const int32_t* from, int64_t B, int64_t Tmax, int64_t len,
            int64_t W) {
#pragma omp parallel for schedule(static) if (B * len * W > 65536)
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(dst + b * Tmax * W, src + static_cast<int64_t>(from[b]) * Tmax * W,
                static_cast<size_t>(len * W) * sizeof(T));
}

}  // namespace

void kv_cache_write(float* cache, const float* src, int64_t B, int64_t Tq, int64_t Tmax,
                    int64_t past, int64_t W, int64_t lds) {
#pragma omp parallel for collapse(2) schedule(static) if (B * Tq * W > 65536)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tq; ++t)
      std::memcpy(cache + (b * Tmax + past + t) * W, src + (b * Tq + t) * lds,
                  static_cast<size_t>(W) * sizeof(float));
}

void kv_cache_write_half(uint16_t* cache, const float* src, int64_t B, int64_t Tq, int64_t Tmax,
                         int64_t past, int64_t W, int64_t lds, bool fp16) {
  const DType h = fp16 ? DType::f16 : DType::bf16;
#pragma omp parallel for collapse(2) schedule(static) if (B * Tq * W > 65536)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tq; ++t)
      convert(src + (b * Tq + t) * lds, DType::f32, cache + (b * Tmax + past + t) * W, h,
              static_cast<size_t>(W));
}

void kv_cache_gather(float* dst, const float* src, const int32_t* from, int64_t B, int64_t Tmax,
                     int64_t len, int64_t W) {
  gather(dst, src, from, B, Tmax, len, W);
}

void kv_cache_gather_half(uint16_t* dst, const uint16_t* src, const int32_t* from, int64_t B,
                          int64_t Tmax, int64_t len, int64_t W) {
  gather(dst, src, from, B, Tmax, len, W);
}

void attention_decode_gqa(float* out, const float* q, const float* kc, const float* vc, int64_t B,
                          int64_t Tq, int64_t past, int64_t Tmax, int64_t NH, int64_t NKV,
                          int64_t hs, int64_t ldq, int64_t window) {
  decode(out, q, F32Rows{kc}, F32Rows{vc}, B, Tq, past, Tmax, NH, NKV, hs, ldq, window);
}

void attention_decode_gqa_half(float* out, const float* q, const uint16_t* kc, const uint16_t* vc,
                               int64_t B, int64_t Tq, int64_t past, int64_t Tmax, int64_t NH,
                               int64_t NKV, int64_t hs, int64_t ldq, int64_t window, bool fp16) {
  const DType h = fp16 ? DType::f16 : DType::bf16;
  decode(out, q, HalfRows{kc, h}, HalfRows{vc, h}, B, Tq, past, Tmax, NH, NKV, hs, ldq, window);
}

}  // namespace snug::kernels

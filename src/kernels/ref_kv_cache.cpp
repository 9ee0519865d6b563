// Reference KV-cache kernels (kernels/kv_cache_ops.inc): the plain loops, double accumulation;
// a 16-bit cache element by element through core/dtype.h's scalar conversions.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "kernels/kv_cache_ops.h"

namespace snug::ref {

namespace {

// Element i of a cache as fp32.
struct F32At {
  const float* c;
  float operator()(int64_t i) const { return c[i]; }
};
struct HalfAt {
  const uint16_t* c;
  bool fp16;
  float operator()(int64_t i) const { return fp16 ? f16_to_f32(c[i]) : bf16_to_f32(c[i]); }
};

template <class At>
void decode(float* out, const float* q, const At& kc, const At& vc, int64_t B, int64_t Tq,
            int64_t past, int64_t Tmax, int64_t NH, int64_t NKV, int64_t hs, int64_t ldq,
            int64_t window) {
  const int64_t W = NKV * hs, group = NH / NKV;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hs));
  std::vector<double> p(static_cast<size_t>(past + Tq));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < NH; ++h)
      for (int64_t t = 0; t < Tq; ++t) {
        const int64_t kh = h / group, n = past + t + 1;  // keys [lo, past + t]
        const int64_t lo = window > 0 ? std::max<int64_t>(0, n - window) : 0;
        const float* qr = q + (b * Tq + t) * ldq + h * hs;
        double mx = -INFINITY;
        for (int64_t s = lo; s < n; ++s) {
          const int64_t kr = (b * Tmax + s) * W + kh * hs;
          double dot = 0.0;
          for (int64_t i = 0; i < hs; ++i) dot += static_cast<double>(qr[i]) * kc(kr + i);
          p[s] = dot * scale;
          mx = std::max(mx, p[s]);
        }
        double sum = 0.0;
        for (int64_t s = lo; s < n; ++s) sum += p[s] = std::exp(p[s] - mx);
        float* o = out + (b * Tq + t) * NH * hs + h * hs;
        for (int64_t i = 0; i < hs; ++i) {
          double acc = 0.0;
          for (int64_t s = lo; s < n; ++s) acc += p[s] * vc((b * Tmax + s) * W + kh * hs + i);
          o[i] = static_cast<float>(acc / sum);
        }
      }
}

template <class T>
void gather(T* dst, const T* src, const int32_t* from, int64_t B, int64_t Tmax, int64_t len,
            int64_t W) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < len; ++t)
      for (int64_t i = 0; i < W; ++i)
        dst[(b * Tmax + t) * W + i] = src[(from[b] * Tmax + t) * W + i];
}

}  // namespace

void kv_cache_write(float* cache, const float* src, int64_t B, int64_t Tq, int64_t Tmax,
                    int64_t past, int64_t W, int64_t lds) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tq; ++t)
      for (int64_t i = 0; i < W; ++i)
        cache[(b * Tmax + past + t) * W + i] = src[(b * Tq + t) * lds + i];
}

void kv_cache_write_half(uint16_t* cache, const float* src, int64_t B, int64_t Tq, int64_t Tmax,
                         int64_t past, int64_t W, int64_t lds, bool fp16) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tq; ++t)
      for (int64_t i = 0; i < W; ++i) {
        const float x = src[(b * Tq + t) * lds + i];
        cache[(b * Tmax + past + t) * W + i] = fp16 ? f32_to_f16(x) : f32_to_bf16(x);
      }
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
  decode(out, q, F32At{kc}, F32At{vc}, B, Tq, past, Tmax, NH, NKV, hs, ldq, window);
}

void attention_decode_gqa_half(float* out, const float* q, const uint16_t* kc, const uint16_t* vc,
                               int64_t B, int64_t Tq, int64_t past, int64_t Tmax, int64_t NH,
                               int64_t NKV, int64_t hs, int64_t ldq, int64_t window, bool fp16) {
  decode(out, q, HalfAt{kc, fp16}, HalfAt{vc, fp16}, B, Tq, past, Tmax, NH, NKV, hs, ldq, window);
}

}  // namespace snug::ref

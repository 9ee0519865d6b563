// Fast KV-cache kernels (kernels/kv_cache_ops.inc). Decoding attention is memory-bound (each new
// query reads every cached key and value once), so the kernel is a single pass per (b, h, t)
// with an online softmax in registers of one row: parallel over batch x heads x queries.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/kv_cache_ops.h"

namespace snug::kernels {

void kv_cache_write(float* cache, const float* src, int64_t B, int64_t Tq, int64_t Tmax,
                    int64_t past, int64_t W, int64_t lds) {
#pragma omp parallel for collapse(2) schedule(static) if (B * Tq * W > 65536)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tq; ++t)
      std::memcpy(cache + (b * Tmax + past + t) * W, src + (b * Tq + t) * lds,
                  static_cast<size_t>(W) * sizeof(float));
}

void kv_cache_gather(float* dst, const float* src, const int32_t* from, int64_t B, int64_t Tmax,
                     int64_t len, int64_t W) {
#pragma omp parallel for schedule(static) if (B * len * W > 65536)
  for (int64_t b = 0; b < B; ++b)
    std::memcpy(dst + b * Tmax * W, src + static_cast<int64_t>(from[b]) * Tmax * W,
                static_cast<size_t>(len * W) * sizeof(float));
}

void attention_decode_gqa(float* out, const float* q, const float* kc, const float* vc, int64_t B,
                          int64_t Tq, int64_t past, int64_t Tmax, int64_t NH, int64_t NKV,
                          int64_t hs, int64_t ldq, int64_t window) {
  const int64_t W = NKV * hs, group = NH / NKV;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel
  {
    std::vector<float> p(static_cast<size_t>(past + Tq));
#pragma omp for collapse(3) schedule(static)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < NH; ++h)
        for (int64_t t = 0; t < Tq; ++t) {
          const int64_t kh = h / group, n = past + t + 1;
          const int64_t lo = window > 0 ? std::max<int64_t>(0, n - window) : 0;
          const float* qr = q + (b * Tq + t) * ldq + h * hs;
          float mx = -INFINITY;
          for (int64_t s = lo; s < n; ++s) {
            const float* kr = kc + (b * Tmax + s) * W + kh * hs;
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int64_t i = 0; i < hs; ++i) dot += qr[i] * kr[i];
            p[s] = dot * scale;
            mx = std::max(mx, p[s]);
          }
          float sum = 0.0f;
          for (int64_t s = lo; s < n; ++s) sum += p[s] = std::exp(p[s] - mx);
          const float inv = 1.0f / sum;
          float* o = out + (b * Tq + t) * NH * hs + h * hs;
          std::fill(o, o + hs, 0.0f);
          for (int64_t s = lo; s < n; ++s) {
            const float* vr = vc + (b * Tmax + s) * W + kh * hs;
            const float w = p[s] * inv;
#pragma omp simd
            for (int64_t i = 0; i < hs; ++i) o[i] += w * vr[i];
          }
        }
  }
}

}  // namespace snug::kernels

// Reference KV-cache kernels (kernels/kv_cache_ops.inc): the plain loops, double accumulation.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kv_cache_ops.h"

namespace snug::ref {

void kv_cache_write(float* cache, const float* src, int64_t B, int64_t Tq, int64_t Tmax,
                    int64_t past, int64_t W, int64_t lds) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < Tq; ++t)
      for (int64_t i = 0; i < W; ++i)
        cache[(b * Tmax + past + t) * W + i] = src[(b * Tq + t) * lds + i];
}

void kv_cache_gather(float* dst, const float* src, const int32_t* from, int64_t B, int64_t Tmax,
                     int64_t len, int64_t W) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < len; ++t)
      for (int64_t i = 0; i < W; ++i)
        dst[(b * Tmax + t) * W + i] = src[(from[b] * Tmax + t) * W + i];
}

void attention_decode_gqa(float* out, const float* q, const float* kc, const float* vc, int64_t B,
                          int64_t Tq, int64_t past, int64_t Tmax, int64_t NH, int64_t NKV,
                          int64_t hs, int64_t ldq, int64_t window) {
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
          const float* kr = kc + (b * Tmax + s) * W + kh * hs;
          double dot = 0.0;
          for (int64_t i = 0; i < hs; ++i) dot += static_cast<double>(qr[i]) * kr[i];
          p[s] = dot * scale;
          mx = std::max(mx, p[s]);
        }
        double sum = 0.0;
        for (int64_t s = lo; s < n; ++s) sum += p[s] = std::exp(p[s] - mx);
        float* o = out + (b * Tq + t) * NH * hs + h * hs;
        for (int64_t i = 0; i < hs; ++i) {
          double acc = 0.0;
          for (int64_t s = lo; s < n; ++s) acc += p[s] * vc[(b * Tmax + s) * W + kh * hs + i];
          o[i] = static_cast<float>(acc / sum);
        }
      }
}

}  // namespace snug::ref

// --bf16-full optimizer steps and gradient reductions on bf16 storage: chunks of kGrain elements
// in parallel, branch-free inner loops the compiler vectorizes. Each element's arithmetic and
// random bits depend only on its index, so the result is the same at any thread count and bit
// for bit that of ref_bf16_full.cpp.
#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"
#include "kernels/stochastic_round.h"

namespace snug::kernels {

namespace {

constexpr int64_t kGrain = 8192;

inline float widen(uint16_t h) {
  return bf16_to_f32(h);
}

// Round to nearest even without a branch (f32_to_bf16's NaN test as a select).
inline uint16_t nearest(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u;
  return static_cast<uint16_t>((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

}  // namespace

void adamw_update_bf16(uint16_t* p, const uint16_t* g, uint16_t* m, uint16_t* v, int64_t n,
                       float lr, float beta1, float beta2, float eps, float weight_decay, int64_t t,
                       uint64_t key) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t));
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  const float step_size = static_cast<float>(lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float b1 = beta1;
  const float b2 = beta2;
  const float one_minus_b1 = static_cast<float>(1.0 - beta1);
  const float one_minus_b2 = static_cast<float>(1.0 - beta2);
  const uint64_t key_v = rounding_substream(key, 1);
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < n; i0 += kGrain) {
    const int64_t i1 = std::min(n, i0 + kGrain);
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) {
      const float gi = widen(g[i]);
      const float mi = b1 * widen(m[i]) + one_minus_b1 * gi;
      const float vi = b2 * widen(v[i]) + one_minus_b2 * gi * gi;
      const float denom = std::sqrt(vi) / bc2_sqrt + eps;
      const float pi = widen(p[i]) * decay - step_size * (mi / denom);
      m[i] = nearest(mi);
      v[i] = f32_to_bf16_stochastic(vi, random_bits(key_v, i));
      p[i] = f32_to_bf16_stochastic(pi, random_bits(key, i));
    }
  }
}

void sgd_update_bf16(uint16_t* p, const uint16_t* g, uint16_t* buf, int64_t n, float lr,
                     float momentum, float weight_decay, bool first, uint64_t key) {
  const float wd = weight_decay;
  const float mu = momentum;
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < n; i0 += kGrain) {
    const int64_t i1 = std::min(n, i0 + kGrain);
    for (int64_t i = i0; i < i1; ++i) {
      const float w = widen(p[i]);
      float d = widen(g[i]);
      if (wd != 0.0f) d = d + wd * w;
      if (buf) {
        d = first ? d : widen(buf[i]) * mu + d;
        buf[i] = nearest(d);
      }
      p[i] = f32_to_bf16_stochastic(w + (-lr) * d, random_bits(key, i));
    }
  }
}

void round_bf16_stochastic(uint16_t* dst, const float* src, int64_t n, uint64_t key) {
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < n; i0 += kGrain) {
    const int64_t i1 = std::min(n, i0 + kGrain);
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) dst[i] = f32_to_bf16_stochastic(src[i], random_bits(key, i));
  }
}

double sum_squares_bf16(const uint16_t* x, int64_t n) {
  // As sum_squares: a fixed number of partial sums added serially (thread-count independent).
  constexpr int64_t kParts = 64;
  double partial[kParts] = {};
  const int64_t chunk = (n + kParts - 1) / kParts;
#pragma omp parallel for schedule(static)
  for (int64_t part = 0; part < kParts; ++part) {
    const int64_t i0 = part * chunk;
    const int64_t i1 = std::min(n, i0 + chunk);
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = i0; i < i1; ++i) {
      const double xi = widen(x[i]);
      acc += xi * xi;
    }
    partial[part] = acc;
  }
  double total = 0.0;
  for (int64_t part = 0; part < kParts; ++part) total += partial[part];
  return total;
}

void scale_bf16(uint16_t* x, float s, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < n; i0 += kGrain) {
    const int64_t i1 = std::min(n, i0 + kGrain);
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) x[i] = nearest(widen(x[i]) * s);
  }
}

}  // namespace snug::kernels

// --bf16-full optimizer steps and gradient reductions on bf16 storage: chunks of detail::kGrain
// elements in parallel, branch-free inner loops the compiler vectorizes. Each element's arithmetic
// and random bits depend only on its index, so the result is the same at any thread count and bit
// for bit that of ref_bf16_full.cpp.
#include <cmath>

#include "kernels/adamw_math.h"
#include "kernels/kernels.h"
#include "kernels/parallel_loops.h"
#include "kernels/partial_sum.h"
#include "kernels/stochastic_round.h"

namespace snug::kernels {

namespace {

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
                       uint64_t key, int64_t offset) {
  const AdamWScalars s = adamw_scalars(lr, beta1, beta2, eps, weight_decay, t);
  const uint64_t key_v = rounding_substream(key, 1);
  detail::for_chunks(n, detail::kGrain, [&](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) {
      float mi = widen(m[i]), vi = widen(v[i]), pi = widen(p[i]);
      adamw_element(s, widen(g[i]), mi, vi, pi);
      m[i] = nearest(mi);
      v[i] = f32_to_bf16_stochastic(vi, random_bits(key_v, offset + i));
      p[i] = f32_to_bf16_stochastic(pi, random_bits(key, offset + i));
    }
  });
}

void adamw_update_master(uint16_t* p, const uint16_t* g, float* master, float* m, float* v,
                         int64_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, int64_t t, bool fp16) {
  const AdamWScalars s = adamw_scalars(lr, beta1, beta2, eps, weight_decay, t);
  detail::for_chunks(n, detail::kGrain, [&](int64_t i0, int64_t i1) {
    if (fp16) {
      for (int64_t i = i0; i < i1; ++i) {
        adamw_element(s, f16_to_f32(g[i]), m[i], v[i], master[i]);
        p[i] = f32_to_f16(master[i]);
      }
      return;
    }
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) {
      adamw_element(s, widen(g[i]), m[i], v[i], master[i]);
      p[i] = nearest(master[i]);
    }
  });
}

void sgd_update_bf16(uint16_t* p, const uint16_t* g, uint16_t* buf, int64_t n, float lr,
                     float momentum, float weight_decay, bool first, uint64_t key, int64_t offset) {
  const float wd = weight_decay;
  const float mu = momentum;
  detail::for_chunks(n, detail::kGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float w = widen(p[i]);
      float d = widen(g[i]);
      if (wd != 0.0f) d = d + wd * w;
      if (buf) {
        d = first ? d : widen(buf[i]) * mu + d;
        buf[i] = nearest(d);
      }
      p[i] = f32_to_bf16_stochastic(w + (-lr) * d, random_bits(key, offset + i));
    }
  });
}

void round_bf16_stochastic(uint16_t* dst, const float* src, int64_t n, uint64_t key) {
  detail::for_chunks(n, detail::kGrain, [&](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) dst[i] = f32_to_bf16_stochastic(src[i], random_bits(key, i));
  });
}

double sum_squares_bf16(const uint16_t* x, int64_t n) {
  return fixed_partial_sum(n, [x](int64_t i) {
    const double xi = widen(x[i]);
    return xi * xi;
  });
}

void scale_bf16(uint16_t* x, float s, int64_t n) {
  detail::for_chunks(n, detail::kGrain, [&](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) x[i] = nearest(widen(x[i]) * s);
  });
}

}  // namespace snug::kernels

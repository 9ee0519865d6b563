// Reference --bf16-full steps and reductions: one element at a time, the scalar converters of
// core/dtype.h, and stochastic rounding written as its definition (round the magnitude up when
// the random 16 bits plus the discarded 16 bits carry). The per-element arithmetic is in float
// in the same order as the fast kernels (the double-precision transcription of torch's AdamW is
// ref::adamw_update; tests compare against both).
#include <cmath>

#include "kernels/adamw_math.h"
#include "kernels/kernels.h"
#include "kernels/stochastic_round.h"

namespace snug::ref {

namespace {

uint16_t stochastic(float f, uint32_t r) {
  if (!std::isfinite(f)) return f32_to_bf16(f);
  const uint32_t u = f32_bits(f);
  const uint32_t discarded = u & 0xffffu;  // in units of 2^-16 ulp
  uint32_t kept = u >> 16;                 // the magnitude truncated (sign in the top bit)
  if ((r & 0xffffu) + discarded >= 0x10000u) ++kept;
  return static_cast<uint16_t>(kept);
}

}  // namespace

void adamw_update_bf16(uint16_t* p, const uint16_t* g, uint16_t* m, uint16_t* v, int64_t n,
                       float lr, float beta1, float beta2, float eps, float weight_decay, int64_t t,
                       uint64_t key) {
  const kernels::AdamWScalars s = kernels::adamw_scalars(lr, beta1, beta2, eps, weight_decay, t);
  const uint64_t key_v = kernels::rounding_substream(key, 1);
  for (int64_t i = 0; i < n; ++i) {
    float mi = bf16_to_f32(m[i]), vi = bf16_to_f32(v[i]), pi = bf16_to_f32(p[i]);
    kernels::adamw_element(s, bf16_to_f32(g[i]), mi, vi, pi);
    m[i] = f32_to_bf16(mi);
    v[i] = stochastic(vi, kernels::random_bits(key_v, i));
    p[i] = stochastic(pi, kernels::random_bits(key, i));
  }
}

void sgd_update_bf16(uint16_t* p, const uint16_t* g, uint16_t* buf, int64_t n, float lr,
                     float momentum, float weight_decay, bool first, uint64_t key) {
  for (int64_t i = 0; i < n; ++i) {
    const float w = bf16_to_f32(p[i]);
    float d = bf16_to_f32(g[i]);
    if (weight_decay != 0.0f) d = d + weight_decay * w;
    if (buf) {
      if (!first) d = bf16_to_f32(buf[i]) * momentum + d;
      buf[i] = f32_to_bf16(d);
    }
    p[i] = stochastic(w + (-lr) * d, kernels::random_bits(key, i));
  }
}

void round_bf16_stochastic(uint16_t* dst, const float* src, int64_t n, uint64_t key) {
  for (int64_t i = 0; i < n; ++i) dst[i] = stochastic(src[i], kernels::random_bits(key, i));
}

double sum_squares_bf16(const uint16_t* x, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double xi = bf16_to_f32(x[i]);
    acc += xi * xi;
  }
  return acc;
}

void scale_bf16(uint16_t* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = f32_to_bf16(bf16_to_f32(x[i]) * s);
}

}  // namespace snug::ref

// Reference --bf16-full steps and reductions: one element at a time, the scalar converters of
// core/dtype.h, and stochastic rounding written as its definition (round the magnitude up when
// the random 16 bits plus the discarded 16 bits carry). The per-element arithmetic is in float
// in the same order as the fast kernels (the double-precision transcription of torch's AdamW is
// ref::adamw_update; tests compare against both).
#include <cmath>
#include <vector>

#include "kernels/adamw_math.h"
#include "kernels/kernels.h"
#include "kernels/optim_math.h"
#include "kernels/stochastic_round.h"

namespace snug::ref {

namespace {

uint16_t stochastic_rounding(float f, uint32_t r) {
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
                       uint64_t key, int64_t offset) {
  const kernels::AdamWScalars s = kernels::adamw_scalars(lr, beta1, beta2, eps, weight_decay, t);
  const uint64_t key_v = kernels::rounding_substream(key, 1);
  for (int64_t i = 0; i < n; ++i) {
    float mi = bf16_to_f32(m[i]), vi = bf16_to_f32(v[i]), pi = bf16_to_f32(p[i]);
    kernels::adamw_element(s, bf16_to_f32(g[i]), mi, vi, pi);
    m[i] = f32_to_bf16(mi);
    v[i] = stochastic_rounding(vi, kernels::random_bits(key_v, offset + i));
    p[i] = stochastic_rounding(pi, kernels::random_bits(key, offset + i));
  }
}

void adamw_update_master(uint16_t* p, const uint16_t* g, float* master, float* m, float* v,
                         int64_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, int64_t t, bool fp16) {
  const kernels::AdamWScalars s = kernels::adamw_scalars(lr, beta1, beta2, eps, weight_decay, t);
  for (int64_t i = 0; i < n; ++i) {
    kernels::adamw_element(s, fp16 ? f16_to_f32(g[i]) : bf16_to_f32(g[i]), m[i], v[i], master[i]);
    p[i] = fp16 ? f32_to_f16(master[i]) : f32_to_bf16(master[i]);
  }
}

void sgd_update_bf16(uint16_t* p, const uint16_t* g, uint16_t* buf, int64_t n, float lr,
                     float momentum, float weight_decay, bool first, uint64_t key, int64_t offset) {
  for (int64_t i = 0; i < n; ++i) {
    const float w = bf16_to_f32(p[i]);
    float d = bf16_to_f32(g[i]);
    if (weight_decay != 0.0f) d = d + weight_decay * w;
    if (buf) {
      if (!first) d = bf16_to_f32(buf[i]) * momentum + d;
      buf[i] = f32_to_bf16(d);
    }
    p[i] = stochastic_rounding(w + (-lr) * d, kernels::random_bits(key, offset + i));
  }
}

void round_bf16_stochastic(uint16_t* dst, const float* src, int64_t n, uint64_t key) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = stochastic_rounding(src[i], kernels::random_bits(key, i));
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

namespace {
uint16_t store(float f, bool stochastic, uint64_t key, int64_t i) {
  return stochastic ? stochastic_rounding(f, kernels::random_bits(key, i)) : f32_to_bf16(f);
}
float clipped(const uint16_t* g, int64_t i, float coef) {
  const float x = bf16_to_f32(g[i]);
  return coef != 1.0f ? x * coef : x;
}
}  // namespace

void lomo_update_bf16(uint16_t* p, const uint16_t* g, int64_t n, float lr, float weight_decay,
                      float grad_coef, bool stochastic, uint64_t key) {
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  for (int64_t i = 0; i < n; ++i) {
    float w = bf16_to_f32(p[i]);
    if (weight_decay > 0.0f) w = w * decay;
    p[i] = store(w + (-lr) * clipped(g, i, grad_coef), stochastic, key, i);
  }
}

// U stored (n floats) rather than recomputed; sums serial in index order.
void adalomo_update_bf16(uint16_t* w, const uint16_t* g, float* R, float* C, float* V, int64_t rows,
                         int64_t cols, float grad_coef, float beta2t, float one_minus_beta2t,
                         float lr_t, float decay, bool apply_decay, bool stochastic, uint64_t key) {
  using kernels::kAdafactorEps1;
  using kernels::rsqrt_f32;
  const int64_t n = rows * cols;
  std::vector<float> gc(static_cast<size_t>(n)), u(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) gc[static_cast<size_t>(i)] = clipped(g, i, grad_coef);
  const auto g2 = [&](int64_t k) {
    const float x = gc[static_cast<size_t>(k)];
    return static_cast<double>(x * x + kAdafactorEps1);
  };
  if (V) {
    for (int64_t i = 0; i < n; ++i) {
      const float x = gc[static_cast<size_t>(i)];
      V[i] = V[i] * beta2t + one_minus_beta2t * (x * x + kAdafactorEps1);
      u[static_cast<size_t>(i)] = rsqrt_f32(V[i]) * x;
    }
  } else {
    for (int64_t i = 0; i < rows; ++i) {
      double s = 0.0;
      for (int64_t j = 0; j < cols; ++j) s += g2(i * cols + j);
      R[i] = R[i] * beta2t + one_minus_beta2t * static_cast<float>(s / static_cast<double>(cols));
    }
    for (int64_t j = 0; j < cols; ++j) {
      double s = 0.0;
      for (int64_t i = 0; i < rows; ++i) s += g2(i * cols + j);
      C[j] = C[j] * beta2t + one_minus_beta2t * static_cast<float>(s / static_cast<double>(rows));
    }
    double racc = 0.0;
    for (int64_t i = 0; i < rows; ++i) racc += static_cast<double>(R[i]);
    const float rmean = static_cast<float>(racc / static_cast<double>(rows));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const int64_t k = i * cols + j;
        u[static_cast<size_t>(k)] =
            (rsqrt_f32(R[i] / rmean) * rsqrt_f32(C[j])) * gc[static_cast<size_t>(k)];
      }
  }
  double ss = 0.0;
  for (const float x : u) ss += static_cast<double>(x) * static_cast<double>(x);
  const float denom = kernels::clip_denominator(ss, n);
  for (int64_t i = 0; i < n; ++i) {
    float wi = bf16_to_f32(w[i]);
    if (apply_decay) wi = wi * decay;
    w[i] = store(wi + (-lr_t) * (u[static_cast<size_t>(i)] / denom), stochastic, key, i);
  }
}

}  // namespace snug::ref

// Per-step scalars and per-element math of the optimizer kernels (kernels/optim_ops.inc), shared
// by the fast (optim_update.cpp) and reference (ref_optim_update.cpp) versions so that the two
// cannot drift apart, in the operation order each optimizer's header in src/optim documents.
// Scalars are formed in double where the optimizers' sources compute them as Python floats and
// applied in float, as torch applies them to float32 tensors. The per-element functions (SNUG_HD)
// are the CUDA kernels' too (kernels/cuda/optim.cu, compiled without fused multiply-adds).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace snug::kernels {

// torch.optim.SGD, one element: d = g + wd p; with a buffer d = first ? d : mu buf + d, buf = d.
SNUG_HD inline void sgd_element(float g, float& p, float* buf, float lr, float mu, float wd,
                                bool first) {
  float d = g;
  if (wd != 0.0f) d = d + wd * p;
  if (buf) {
    // torch: buf = clone(d) at the first step, else buf.mul_(momentum).add_(d).
    d = first ? d : *buf * mu + d;
    *buf = d;
  }
  p = p + (-lr) * d;
}

struct LionScalars {
  float b1, b2, one_minus_b1, one_minus_b2, decay, neg_lr;
};

inline LionScalars lion_scalars(float lr, float beta1, float beta2, float weight_decay) {
  const double wd = static_cast<double>(weight_decay);
  return {beta1,
          beta2,
          static_cast<float>(1.0 - static_cast<double>(beta1)),
          static_cast<float>(1.0 - static_cast<double>(beta2)),
          static_cast<float>(1.0 - static_cast<double>(lr) * wd),
          -lr};
}

// One Lion element, p and m in/out.
SNUG_HD inline void lion_element(const LionScalars& s, float g, float& m, float& p) {
  const float c = m * s.b1 + s.one_minus_b1 * g;
  const float u = c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : 0.0f);
  p = p * s.decay + s.neg_lr * u;
  m = m * s.b2 + s.one_minus_b2 * g;
}

// bitsandbytes' Lion element: a non-finite gradient zeroes the state and skips the update.
SNUG_HD inline void lion_bnb_element(const LionScalars& s, float g, float& m, float& p) {
  if (!std::isfinite(g)) {
    m = 0.0f;
    return;
  }
  lion_element(s, g, m, p);
}

struct AdamBnbScalars {
  float b1, b2, one_minus_b1, one_minus_b2, step_size, correction2_eps, decay;
  bool apply_decay;
};

inline AdamBnbScalars adam_bnb_scalars(float lr, float beta1, float beta2, float eps,
                                       float weight_decay, int64_t t) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t));
  const double bc2 = std::sqrt(1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t)));
  AdamBnbScalars s;
  s.b1 = beta1;
  s.b2 = beta2;
  s.one_minus_b1 = 1.0f - beta1;
  s.one_minus_b2 = 1.0f - beta2;
  s.step_size = static_cast<float>(-static_cast<double>(lr) * bc2 / bc1);
  s.correction2_eps = static_cast<float>(bc2) * eps;
  s.decay = 1.0f - lr * weight_decay;
  s.apply_decay = weight_decay > 0.0f;
  return s;
}

// bitsandbytes' AdamW element (fp32 part of the 8-bit update); m, v and p in/out.
SNUG_HD inline void adam_bnb_element(const AdamBnbScalars& s, float g, float& m, float& v,
                                     float& p) {
  if (!std::isfinite(g)) {
    m = 0.0f;
    v = 0.0f;
    return;
  }
  v = v * s.b2 + s.one_minus_b2 * g * g;
  m = m * s.b1 + s.one_minus_b1 * g;
  p = p + s.step_size * (m / (std::sqrt(v) + s.correction2_eps));
  if (s.apply_decay) p = p * s.decay;
}

// Adafactor / AdaLomo (optim/adafactor.h, optim/lomo.h).
inline constexpr float kAdafactorEps1 = 1e-30f;         // added to g^2
inline constexpr double kAdafactorClipThreshold = 1.0;  // U /= max(1, RMS(U) / this)

SNUG_HD inline float rsqrt_f32(float x) {
  return 1.0f / std::sqrt(x);
}

// A vector's second moment V updated by one element, and its update rsqrt(V) g.
SNUG_HD inline float vector_moment_update(float g, float& V, float beta2t, float one_minus_beta2t) {
  V = V * beta2t + one_minus_beta2t * (g * g + kAdafactorEps1);
  return rsqrt_f32(V) * g;
}

// max(1, RMS(U) / clip threshold) from the sum of squares ss of n update values.
SNUG_HD inline float clip_denominator(double ss, int64_t n) {
  const float rms_u = static_cast<float>(std::sqrt(ss) / std::sqrt(static_cast<double>(n)));
  return std::max(rms_u / static_cast<float>(kAdafactorClipThreshold), 1.0f);
}

// GaLore's Adam on one element of the (projected) gradient: m, v updated; returns m/(sqrt v + eps).
SNUG_HD inline float galore_adam_element(float g, float& m, float& v, float b1, float b2,
                                         float eps) {
  const float one_minus_b1 = static_cast<float>(1.0 - static_cast<double>(b1));
  const float one_minus_b2 = static_cast<float>(1.0 - static_cast<double>(b2));
  m = m * b1 + one_minus_b1 * g;
  v = v * b2 + one_minus_b2 * (g * g);
  return m / (std::sqrt(v) + eps);
}

// p += neg_step u, then decoupled weight decay p += decay_alpha p.
SNUG_HD inline void galore_apply_element(float& p, float u, float neg_step, float decay_alpha,
                                         bool decay) {
  float w = p + neg_step * u;
  if (decay) w = w + decay_alpha * w;
  p = w;
}

}  // namespace snug::kernels

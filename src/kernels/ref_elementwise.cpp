// Reference elementwise ops and the AdamW step.
#include <cmath>

#include "core/random.h"
#include "kernels/kernels.h"

namespace snug::ref {

int64_t count_valid_targets(const int32_t* targets, int64_t n) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i)
    if (targets[i] >= 0) ++count;
  return count;
}

void add_uniform_noise(float* x, int64_t n, uint64_t seed, double m) {
  SplitMix64 rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    const double u = rng.uniform();
    x[i] = x[i] + static_cast<float>((u + u - 1.0) * m);
  }
}

void add(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

double sum_squares(const float* x, int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<double>(x[i]) * x[i];
  return acc;
}

void sum_squares_each(double* out, const void* const* xs, const int64_t* ns, const bool* bf16,
                      int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    out[i] = bf16[i] ? sum_squares_bf16(static_cast<const uint16_t*>(xs[i]), ns[i])
                     : sum_squares(static_cast<const float*>(xs[i]), ns[i]);
}

void scale(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

// Same operation order as torch.optim.AdamW's single-tensor path, evaluated in double.
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t t) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t));
  const double step_size = lr / bc1;
  const double bc2_sqrt = std::sqrt(bc2);
  for (int64_t i = 0; i < n; ++i) {
    double pi = p[i];
    const double gi = g[i];
    pi *= 1.0 - static_cast<double>(lr) * weight_decay;
    const double mi = beta1 * static_cast<double>(m[i]) + (1.0 - beta1) * gi;
    const double vi = beta2 * static_cast<double>(v[i]) + (1.0 - beta2) * gi * gi;
    const double denom = std::sqrt(vi) / bc2_sqrt + eps;
    pi -= step_size * mi / denom;
    p[i] = static_cast<float>(pi);
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
  }
}

}  // namespace snug::ref

// AdamW step with torch.optim.AdamW's operation order (single-tensor path):
//   param.mul_(1 - lr*wd); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   denom = sqrt(v) / sqrt(1 - b2^t) + eps; param -= (lr / (1 - b1^t)) * m / denom.
// Scalars (bias corrections, step size) are computed in double like Python floats, then the
// per-element math runs in float like PyTorch's float32 tensors.
#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"

namespace snug::kernels {

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t t) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t));
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  const float step_size = static_cast<float>(lr / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float b1 = beta1;
  const float b2 = beta2;
  const float one_minus_b1 = static_cast<float>(1.0 - beta1);
  const float one_minus_b2 = static_cast<float>(1.0 - beta2);
  constexpr int64_t kGrain = 8192;
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < n; i0 += kGrain) {
    const int64_t i1 = std::min(n, i0 + kGrain);
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) {
      const float gi = g[i];
      const float mi = b1 * m[i] + one_minus_b1 * gi;
      const float vi = b2 * v[i] + one_minus_b2 * gi * gi;
      const float denom = std::sqrt(vi) / bc2_sqrt + eps;
      p[i] = p[i] * decay - step_size * (mi / denom);
      m[i] = mi;
      v[i] = vi;
    }
  }
}

}  // namespace snug::kernels

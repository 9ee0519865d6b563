// torch.optim.AdamW's step, shared by the fp32 kernel (adamw.cpp) and the bf16-storage ones
// (bf16_full.cpp, ref_bf16_full.cpp), so that the three cannot drift apart:
//   param.mul_(1 - lr*wd); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
//   denom = sqrt(v) / sqrt(1 - b2^t) + eps; param -= (lr / (1 - b1^t)) * m / denom.
// The per-step scalars are computed in double like Python floats; the per-element math runs in
// float like PyTorch's float32 tensors, in exactly this order. adamw_element is the CUDA kernels'
// too (SNUG_HD).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/host_device.h"

namespace snug::kernels {

struct AdamWScalars {
  float decay, step_size, bc2_sqrt, b1, b2, one_minus_b1, one_minus_b2, eps;
};

inline AdamWScalars adamw_scalars(float lr, float beta1, float beta2, float eps, float weight_decay,
                                  int64_t t) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t));
  return {static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay),
          static_cast<float>(lr / bc1),
          static_cast<float>(std::sqrt(bc2)),
          beta1,
          beta2,
          static_cast<float>(1.0 - beta1),
          static_cast<float>(1.0 - beta2),
          eps};
}

// One element: m, v and p updated in place (fp32 values, whatever their storage).
SNUG_HD inline void adamw_element(const AdamWScalars& s, float g, float& m, float& v, float& p) {
  m = s.b1 * m + s.one_minus_b1 * g;
  v = s.b2 * v + s.one_minus_b2 * g * g;
  const float denom = std::sqrt(v) / s.bc2_sqrt + s.eps;
  p = p * s.decay - s.step_size * (m / denom);
}

}  // namespace snug::kernels

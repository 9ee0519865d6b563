// Reference gated SiLU and exact-erf GELU, in double.
#include <cmath>

#include "kernels/kernels.h"

namespace snug::ref {

void swiglu_forward(float* out, const float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double s = 1.0 / (1.0 + std::exp(-g));
    const double d = dout[i], u = up[i];  // read first: dup or dgate may alias dout
    if (dup) dup[i] = static_cast<float>(d * g * s);
    if (dgate) dgate[i] = static_cast<float>(d * u * s * (1.0 + g * (1.0 - s)));
  }
}

void gelu_erf_forward(float* out, const float* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    out[i] = static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
  }
}

void gelu_erf_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
  const double inv_sqrt_2pi = 1.0 / std::sqrt(2.0 * 3.14159265358979323846);
  for (int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    const double cdf = 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));
    dinp[i] = static_cast<float>((cdf + x * inv_sqrt_2pi * std::exp(-0.5 * x * x)) * dout[i]);
  }
}

}  // namespace snug::ref

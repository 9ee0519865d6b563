// Gated SiLU (SwiGLU) and exact-erf GELU, elementwise in parallel chunks.
//   silu(g) = g s, s = 1/(1 + e^-g);  silu'(g) = s (1 + g (1 - s)).
//   gelu(x) = 0.5 x (1 + erf(x/sqrt2));  gelu'(x) = 0.5 (1 + erf(x/sqrt2)) + x phi(x),
//   phi(x) = exp(-x^2/2) / sqrt(2 pi).
#include <cmath>

#include "kernels/fast_math.h"
#include "kernels/kernels.h"
#include "kernels/parallel_loops.h"

namespace snug::kernels {

namespace {
constexpr float kInvSqrt2 = 0.70710678118654752440f;
constexpr float kInvSqrt2Pi = 0.39894228040143267794f;
}  // namespace

void swiglu_forward(float* out, const float* gate, const float* up, int64_t n) {
  detail::for_chunks(n, detail::kMathGrain, [&](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) {
      const float g = gate[i];
      out[i] = g / (1.0f + detail::fast_exp(-g)) * up[i];
    }
  });
}

void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, int64_t n) {
  detail::for_chunks(n, detail::kMathGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float g = gate[i];
      const float s = 1.0f / (1.0f + detail::fast_exp(-g));
      const float d = dout[i], u = up[i];  // read first: dup or dgate may alias dout
      if (dup) dup[i] = d * g * s;
      if (dgate) dgate[i] = d * u * s * (1.0f + g * (1.0f - s));
    }
  });
}

void gelu_erf_forward(float* out, const float* inp, int64_t n) {
  detail::for_chunks(n, detail::kMathGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float x = inp[i];
      out[i] = 0.5f * x * (1.0f + std::erf(x * kInvSqrt2));
    }
  });
}

void gelu_erf_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
  detail::for_chunks(n, detail::kMathGrain, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float x = inp[i];
      const float cdf = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
      const float pdf = kInvSqrt2Pi * std::exp(-0.5f * x * x);
      dinp[i] = (cdf + x * pdf) * dout[i];
    }
  });
}

}  // namespace snug::kernels

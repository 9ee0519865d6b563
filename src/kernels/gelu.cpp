// GELU (tanh approximation) without libm in the loop, so that it vectorizes:
//   0.5 x (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + exp(-2u)),
// which is also free of the cancellation 1 + tanh(u) suffers for negative x.
// Derivative: with s = sigmoid(2u), 0.5 (1 + tanh u) = s and 1 - tanh^2 u = 4 s (1 - s), so
//   gelu'(x) = s + 2 x s (1 - s) u'(x),  u'(x) = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
#include "kernels/fast_math.h"
#include "kernels/kernels.h"
#include "kernels/parallel_loops.h"

namespace snug::kernels {

namespace {
constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kCubic = 0.044715f;
}  // namespace

void gelu_forward(float* out, const float* inp, int64_t n) {
  detail::for_chunks(n, detail::kMathGrain, [&](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) {
      const float x = inp[i];
      const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
      out[i] = x / (1.0f + detail::fast_exp(-2.0f * u));
    }
  });
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
  detail::for_chunks(n, detail::kMathGrain, [&](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) {
      const float x = inp[i];
      const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
      const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
      const float s = 1.0f / (1.0f + detail::fast_exp(-2.0f * u));
      dinp[i] = (s + 2.0f * x * s * (1.0f - s) * du) * dout[i];
    }
  });
}

}  // namespace snug::kernels

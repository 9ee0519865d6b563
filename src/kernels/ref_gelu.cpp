// Reference GELU (tanh approximation), evaluated literally in double.
#include <cmath>

#include "kernels/kernels.h"

namespace snug::ref {

namespace {
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kCubic = 0.044715;
}  // namespace

void gelu_forward(float* out, const float* inp, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    out[i] =
        static_cast<float>(0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x))));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double x = inp[i];
    const double u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const double th = std::tanh(u);
    const double du = kSqrt2OverPi * (1.0 + 3.0 * kCubic * x * x);
    const double grad = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
    dinp[i] = static_cast<float>(grad * dout[i]);
  }
}

}  // namespace snug::ref

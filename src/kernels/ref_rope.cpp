// Reference rotary embedding: the same float angles (kernels/rope_angle.h), cos/sin and the
// rotation in double.
#include <cmath>

#include "kernels/kernels.h"
#include "kernels/rope_angle.h"

namespace snug::ref {

namespace {

void rope_apply(float* x, int64_t B, int64_t T, int64_t NH, int64_t hs, int64_t ld, int64_t R,
                float theta, const int32_t* pos, const float* inv_freq, double sign) {
  const int64_t half = R / 2;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < NH; ++h) {
        float* p = x + (b * T + t) * ld + h * hs;
        for (int64_t j = 0; j < half; ++j) {
          const double a =
              kernels::detail::rope_angle(pos ? pos[b * T + t] : t, j, R, theta, inv_freq);
          const double c = std::cos(a), s = sign * std::sin(a);
          const double x1 = p[j], x2 = p[j + half];
          p[j] = static_cast<float>(x1 * c - x2 * s);
          p[j + half] = static_cast<float>(x2 * c + x1 * s);
        }
      }
}

}  // namespace

#include "kernels/rope_entry.inc"

}  // namespace snug::ref

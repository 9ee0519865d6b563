// Rotary position embedding (rotate_half pairing), in place: rows (b, t) in parallel, each row's
// R/2 cos/sin pairs computed once and applied to all NH heads. Scratch: R floats per call on the
// stack-like thread-local buffer (R <= head size).
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/rope_angle.h"

namespace snug::kernels {

namespace {

// sign = +1: forward rotation by +a; -1: the transpose (rotation by -a).
void rope_apply(float* x, int64_t B, int64_t T, int64_t NH, int64_t hs, int64_t ld, int64_t R,
                float theta, const int32_t* pos_ids, const float* inv_freq, float sign) {
  const int64_t half = R / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j) inv[j] = detail::rope_inv_freq(j, R, theta, inv_freq);
#pragma omp parallel for schedule(static)
  for (int64_t bt = 0; bt < B * T; ++bt) {
    thread_local std::vector<float> cs;
    if (cs.size() < static_cast<size_t>(R)) cs.resize(static_cast<size_t>(R));
    const float pos = static_cast<float>(pos_ids ? pos_ids[bt] : bt % T);
    for (int64_t j = 0; j < half; ++j) {
      const float a = pos * inv[j];
      cs[j] = std::cos(a);
      cs[half + j] = sign * std::sin(a);
    }
    float* row = x + bt * ld;
    for (int64_t h = 0; h < NH; ++h) {
      float* p = row + h * hs;
#pragma omp simd
      for (int64_t j = 0; j < half; ++j) {
        const float x1 = p[j], x2 = p[j + half];
        const float c = cs[j], s = cs[half + j];
        p[j] = x1 * c - x2 * s;
        p[j + half] = x2 * c + x1 * s;
      }
    }
  }
}

}  // namespace

#include "kernels/rope_entry.inc"

}  // namespace snug::kernels

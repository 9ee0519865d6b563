// Internal to the fast kernels: the vectorized steps of a softmax over one row, shared by
// attention.cpp, flash_attention.cpp, softmax_xent.cpp and lm_head.cpp. Each is one vectorized
// loop; sums are float partials per lane in a fixed order (lane_sum.h: a row of up to ~50k
// values keeps the error well under 1e-6), exponentials are detail::fast_exp.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/fast_math.h"
#include "kernels/lane_sum.h"

namespace snug::kernels::detail {

// max(init, x[0..n)).
inline float row_max(const float* x, int64_t n, float init = -INFINITY) {
  float m = init;
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}

// out[j] = exp(x[j] - shift) for j in [0, n); returns their sum. out may be x (in place).
inline float exp_shifted(float* out, const float* x, int64_t n, float shift) {
  return lane_sum(n, [&](int64_t j) {
    const float e = fast_exp(x[j] - shift);
    out[j] = e;
    return e;
  });
}

// sum over j in [0, n) of exp(x[j] - shift), nothing stored.
inline float sum_exp_shifted(const float* x, int64_t n, float shift) {
  return lane_sum(n, [&](int64_t j) { return fast_exp(x[j] - shift); });
}

// x[j] *= k for j in [0, n).
inline void scale_row(float* x, int64_t n, float k) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) x[j] *= k;
}

// sum over j in [0, n) of a[j] * b[j].
inline float row_dot(const float* a, const float* b, int64_t n) {
  return lane_sum(n, [&](int64_t j) { return a[j] * b[j]; });
}

// Cross-entropy of one row, -log softmax(x)[target], from the row's sum of exp(x - max) and
// x[target] - max; the log in double.
inline float xent_from_sum(float sum, float shifted_target) {
  return static_cast<float>(std::log(static_cast<double>(sum)) - shifted_target);
}

}  // namespace snug::kernels::detail

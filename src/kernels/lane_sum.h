// Internal to the fast kernels: a float sum whose order is the same on every host.
//
// `#pragma omp simd reduction(+ : s)` lets the compiler choose the summation order by vector
// width (8 partial sums on AVX2, 16 on AVX-512), so the same kernel rounded differently on the
// two kinds of host and training trajectories parted from step 1 (issue 26). Here the order is
// written down: kLanes running sums (lane k takes the terms i with i % kLanes == k, the tail
// too), then added pairwise in a fixed tree. GCC vectorizes the lanes into one zmm or two ymm
// registers of accumulators, so it is as fast as the simd reduction.
#pragma once

#include <cstdint>

namespace snug::kernels::detail {

inline constexpr int kSumLanes = 16;

// Sum over i in [0, n) of term(i) (float), in the fixed order above.
template <typename Term>
inline float lane_sum(int64_t n, Term term) {
  float lane[kSumLanes] = {};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes)
    for (int k = 0; k < kSumLanes; ++k) lane[k] += term(i + k);
  for (int k = 0; i < n; ++i, ++k) lane[k] += term(i);
  for (int w = kSumLanes / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k) lane[k] += lane[k + w];
  return lane[0];
}

}  // namespace snug::kernels::detail

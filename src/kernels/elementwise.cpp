// Elementwise ops: chunks of detail::kGrain elements in parallel, vectorizable inner loops.
#include "core/random.h"
#include "kernels/kernels.h"
#include "kernels/parallel_loops.h"
#include "kernels/partial_sum.h"

namespace snug::kernels {

int64_t count_valid_targets(const int32_t* targets, int64_t n) {
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) count += targets[i] >= 0 ? 1 : 0;
  return count;
}

void add_uniform_noise(float* x, int64_t n, uint64_t seed, double m) {
  // Sequential: draw i belongs to element i whatever the thread count.
  SplitMix64 rng(seed);
  for (int64_t i = 0; i < n; ++i) x[i] += static_cast<float>((2.0 * rng.uniform() - 1.0) * m);
}

void add(float* out, const float* a, const float* b, int64_t n) {
  detail::for_chunks(n, detail::kGrain, [&](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) out[i] = a[i] + b[i];
  });
}

double sum_squares(const float* x, int64_t n) {
  return fixed_partial_sum(n, [x](int64_t i) { return static_cast<double>(x[i]) * x[i]; });
}

void sum_squares_each(double* out, const void* const* xs, const int64_t* ns, const bool* bf16,
                      int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    out[i] = bf16[i] ? sum_squares_bf16(static_cast<const uint16_t*>(xs[i]), ns[i])
                     : sum_squares(static_cast<const float*>(xs[i]), ns[i]);
}

void scale(float* x, float s, int64_t n) {
  detail::for_chunks(n, detail::kGrain, [&](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) x[i] *= s;
  });
}

}  // namespace snug::kernels

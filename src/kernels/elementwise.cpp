// Elementwise ops: chunks of kGrain elements in parallel, vectorizable inner loops.
#include <algorithm>

#include "kernels/kernels.h"

namespace snug::kernels {

namespace {
constexpr int64_t kGrain = 8192;
}  // namespace

void add(float* out, const float* a, const float* b, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < n; i0 += kGrain) {
    const int64_t i1 = std::min(n, i0 + kGrain);
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) out[i] = a[i] + b[i];
  }
}

double sum_squares(const float* x, int64_t n) {
  // A fixed number of fixed-size partial sums, added serially: the result does not depend on
  // the thread count or schedule (bitwise reproducible gradient norms).
  constexpr int64_t kParts = 64;
  double partial[kParts] = {};
  const int64_t chunk = (n + kParts - 1) / kParts;
#pragma omp parallel for schedule(static)
  for (int64_t part = 0; part < kParts; ++part) {
    const int64_t i0 = part * chunk;
    const int64_t i1 = std::min(n, i0 + chunk);
    double acc = 0.0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = i0; i < i1; ++i) acc += static_cast<double>(x[i]) * x[i];
    partial[part] = acc;
  }
  double total = 0.0;
  for (int64_t part = 0; part < kParts; ++part) total += partial[part];
  return total;
}

void scale(float* x, float s, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < n; i0 += kGrain) {
    const int64_t i1 = std::min(n, i0 + kGrain);
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) x[i] *= s;
  }
}

}  // namespace snug::kernels

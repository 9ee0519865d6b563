// A sum over [0, n) in double as a fixed number of fixed-size partial sums added serially: the
// result does not depend on the thread count or schedule (bitwise reproducible gradient norms).
// Shared by sum_squares (fp32) and sum_squares_bf16.
#pragma once

#include <algorithm>
#include <cstdint>

namespace snug::kernels {

// term(i) -> double, for i in [0, n).
template <typename Term>
double fixed_partial_sum(int64_t n, Term term) {
  constexpr int64_t kParts = 64;
  double partial[kParts] = {};
  const int64_t chunk = (n + kParts - 1) / kParts;
#pragma omp parallel for schedule(static)
  for (int64_t part = 0; part < kParts; ++part) {
    const int64_t i0 = part * chunk;
    const int64_t i1 = std::min(n, i0 + chunk);
    // kLanes independent accumulators, added in a fixed order at the end: a single running sum
    // is bound by the latency of a double add (measured 5.7 GB/s over 124M floats; 16 lanes
    // vectorize into zmm chains and are memory-bound: 29 ms, as with 8).
    constexpr int64_t kLanes = 16;
    double lane[kLanes] = {};
    int64_t i = i0;
    for (; i + kLanes <= i1; i += kLanes)
      for (int64_t k = 0; k < kLanes; ++k) lane[k] += term(i + k);
    for (int64_t k = 0; i < i1; ++i, ++k) lane[k] += term(i);
    double acc = 0.0;
    for (int64_t k = 0; k < kLanes; ++k) acc += lane[k];
    partial[part] = acc;
  }
  double total = 0.0;
  for (int64_t part = 0; part < kParts; ++part) total += partial[part];
  return total;
}

}  // namespace snug::kernels

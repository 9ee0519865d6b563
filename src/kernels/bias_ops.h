// Internal to the Linear kernels (linear.cpp, linear_nt.cpp): the bias in the forward and its
// gradient (column sums) in the backward, shared by both weight layouts.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/parallel_loops.h"

namespace snug::kernels::detail {

// out(N,OC) += b(OC), row by row.
inline void add_bias(float* out, const float* b, int64_t N, int64_t OC) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* o = out + n * OC;
#pragma omp simd
    for (int64_t j = 0; j < OC; ++j) o[j] += b[j];
  }
}

// db(OC) += column sums of dout(N,OC), parallel over blocks of columns (for_column_blocks). T is
// float, or uint16_t for bf16 bit patterns.
template <typename T>
void add_column_sums(float* db, const T* dout, int64_t N, int64_t OC) {
  for_column_blocks(OC, [&](int64_t o0, int64_t width) {
    double acc[kColumnBlock] = {};
    for (int64_t n = 0; n < N; ++n) {
      const T* d = dout + n * OC + o0;
      if constexpr (sizeof(T) == 2) {
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) acc[j] += bf16_to_f32(d[j]);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) acc[j] += d[j];
      }
    }
    for (int64_t j = 0; j < width; ++j) db[o0 + j] += static_cast<float>(acc[j]);
  });
}

}  // namespace snug::kernels::detail

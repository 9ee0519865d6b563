// The machine's practical fp32 GEMM peak, the denominator of the MFU figures in the benchmarks.
#pragma once

#include <cstdint>

namespace snug::kernels {

// Runs C = A B on n x n x n fp32 matrices through gemm_f32 (with the current OpenMP thread
// count) for about `seconds` after one warm-up call, and returns the best FLOP/s (2 n^3 per
// call) of any single call. Allocates three n x n matrices (12 MiB at n = 1024) for its
// duration: it is a measurement tool, not a kernel.
double measure_gemm_peak_flops(int64_t n = 1024, double seconds = 0.5);

}  // namespace snug::kernels

// The machine's practical GEMM peak, the denominator of the MFU figures in the benchmarks.
#pragma once

#include <cstdint>

#include "kernels/gemm_path.h"

namespace snug::kernels {

// Runs C = A B on n x n x n matrices (with the current OpenMP thread count) for about `seconds`
// after one warm-up call, and returns the best FLOP/s (2 n^3 per call) of any single call:
// through gemm_f32 (fp32, and bf16 on the widen path, which multiplies widened values), or
// through gemm_bf16 on the onednn_bf16 path, i.e. the library and dtype a run's GEMMs use.
// Allocates the matrices (12 MiB of fp32 at n = 1024, plus their bf16 copies) for its duration:
// it is a measurement tool, not a kernel.
double measure_gemm_peak_flops(int64_t n = 1024, double seconds = 0.5,
                               GemmPath bf16 = GemmPath::widen);

}  // namespace snug::kernels

// Block-wide reductions for the row kernels (one block per row): fixed order (warp shuffles, then
// the warps' partials in warp order), so two runs give the same bits. blockDim.x must be a
// multiple of 32 (at most 1024); every thread of the block must call, and all get the result.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

namespace snug::cuda {

template <typename T, typename Op>
__device__ T block_reduce(T v, Op op, T identity) {
  __shared__ T part[32];
  __shared__ T result;
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_down_sync(0xffffffffu, v, o));
  __syncthreads();  // an earlier call's readers of part/result are done
  if (lane == 0) part[warp] = v;
  __syncthreads();
  if (warp == 0) {
    T s = lane < (blockDim.x + 31) / 32 ? part[lane] : identity;
    for (int o = 16; o > 0; o >>= 1) s = op(s, __shfl_down_sync(0xffffffffu, s, o));
    if (lane == 0) result = s;
  }
  __syncthreads();
  return result;
}

struct SumOp {
  template <typename T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

__device__ inline double block_sum(double v) {
  return block_reduce(v, SumOp{}, 0.0);
}
__device__ inline float block_max(float v) {
  return block_reduce(v, MaxOp{}, -INFINITY);
}

}  // namespace snug::cuda

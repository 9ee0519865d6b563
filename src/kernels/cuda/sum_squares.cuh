// Sum of squares in double for gradient norms (sum_squares, sum_squares_bf16), deterministic: a
// grid fixed by n writes one partial per block, and one thread adds the partials in order (no
// atomics), so two runs give the same norm. `widen` turns an element into float.
#pragma once

#include "kernels/cuda/context.cuh"

namespace snug::cuda {

namespace sum_squares_detail {

constexpr int kThreads = 256, kBlocks = 256;

template <typename T, typename Widen>
__global__ void partials_kernel(const T* x, int64_t n, double* part, Widen widen) {
  __shared__ double red[kThreads];
  double s = 0.0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const double v = widen(x[i]);
    s += v * v;
  }
  red[threadIdx.x] = s;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) red[threadIdx.x] += red[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) part[blockIdx.x] = red[0];
}

// part[0] = sum of part[0, count), in order.
__global__ inline void add_partials_kernel(double* part, int count) {
  double s = 0.0;
  for (int i = 0; i < count; ++i) s += part[i];
  part[0] = s;
}

}  // namespace sum_squares_detail

template <typename T, typename Widen>
double sum_squares_of(const T* x, int64_t n, Widen widen, const char* what) {
  using namespace sum_squares_detail;
  if (n <= 0) return 0.0;
  const unsigned blocks = capped_blocks(n, kBlocks, kThreads);
  Scratch part(blocks * sizeof(double));
  partials_kernel<<<blocks, kThreads, 0, stream()>>>(x, n, part.as<double>(), widen);
  check_launch(what);
  add_partials_kernel<<<1, 1, 0, stream()>>>(part.as<double>(), static_cast<int>(blocks));
  check_launch(what);
  double h = 0.0;
  check(cudaMemcpyAsync(&h, part.as<double>(), sizeof(double), cudaMemcpyDeviceToHost, stream()),
        what);
  sync(what);
  return h;
}

}  // namespace snug::cuda

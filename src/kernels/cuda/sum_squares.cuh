// Sum of squares in double for gradient norms (sum_squares, sum_squares_bf16, sum_squares_each),
// deterministic: a grid fixed by n writes one partial per block, and one thread adds the partials
// in order (no atomics), so two runs give the same norm, and sum_squares_each's sums are those of
// the single ops bit for bit. `widen` turns an element into float.
#pragma once

#include "kernels/cuda/context.cuh"
#include "kernels/cuda/half_bits.cuh"

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

// *sum = sum of part[0, count), in order (sum may be part itself).
__global__ inline void add_partials_kernel(const double* part, int count, double* sum) {
  double s = 0.0;
  for (int i = 0; i < count; ++i) s += part[i];
  *sum = s;
}

}  // namespace sum_squares_detail

// The widenings of the two gradient dtypes.
struct AsIs {
  __device__ float operator()(float v) const { return v; }
};
struct Bf16Widen {
  __device__ float operator()(uint16_t v) const { return bf16_to_f32(v); }
};

// Launches the sum of squares of x(n) into *sum, without waiting; part holds the partials
// (sum_squares_detail::kBlocks doubles at most) and may be reused by the next launch on the
// stream. n <= 0 gives 0.
template <typename T, typename Widen>
void launch_sum_squares(const T* x, int64_t n, Widen widen, double* part, double* sum,
                        const char* what) {
  using namespace sum_squares_detail;
  const unsigned blocks = n > 0 ? capped_blocks(n, kBlocks, kThreads) : 0u;
  if (blocks > 0) {
    partials_kernel<<<blocks, kThreads, 0, stream()>>>(x, n, part, widen);
    check_launch(what);
  }
  add_partials_kernel<<<1, 1, 0, stream()>>>(part, static_cast<int>(blocks), sum);
  check_launch(what);
}

template <typename T, typename Widen>
double sum_squares_of(const T* x, int64_t n, Widen widen, const char* what) {
  using namespace sum_squares_detail;
  if (n <= 0) return 0.0;
  Scratch part(capped_blocks(n, kBlocks, kThreads) * sizeof(double));
  launch_sum_squares(x, n, widen, part.as<double>(), part.as<double>(), what);
  double h = 0.0;
  check(cudaMemcpyAsync(&h, part.as<double>(), sizeof(double), cudaMemcpyDeviceToHost, stream()),
        what);
  sync(what);
  return h;
}

}  // namespace snug::cuda

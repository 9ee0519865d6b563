// Elementwise ops and reductions of kernels/ops.inc: add, scale, sum_squares.
#include "kernels/cuda/context.cuh"

namespace snug::cuda {

namespace {

__global__ void add_kernel(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = a[i] + b[i];
}

__global__ void scale_kernel(float* x, float s, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    x[i] *= s;
}

// One block per grid-stride slice, summed in double; each block adds its partial with one
// atomicAdd (double atomics: sm_60 and later).
__global__ void sum_squares_kernel(const float* x, int64_t n, double* out) {
  __shared__ double part[256];
  double s = 0.0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const double v = x[i];
    s += v * v;
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) atomicAdd(out, part[0]);
}

unsigned grid_for(int64_t n) {
  return capped_blocks(n, 4096);
}

void add(float* out, const float* a, const float* b, int64_t n) {
  if (n <= 0) return;
  add_kernel<<<grid_for(n), 256, 0, stream()>>>(out, a, b, n);
  check_launch("add");
}

void scale(float* x, float s, int64_t n) {
  if (n <= 0) return;
  scale_kernel<<<grid_for(n), 256, 0, stream()>>>(x, s, n);
  check_launch("scale");
}

double sum_squares(const float* x, int64_t n) {
  if (n <= 0) return 0.0;
  Scratch acc(sizeof(double));
  check(cudaMemsetAsync(acc.as<double>(), 0, sizeof(double), stream()), "sum_squares memset");
  sum_squares_kernel<<<capped_blocks(n, 1024), 256, 0, stream()>>>(x, n, acc.as<double>());
  check_launch("sum_squares");
  double h = 0.0;
  check(cudaMemcpyAsync(&h, acc.as<double>(), sizeof(double), cudaMemcpyDeviceToHost, stream()),
        "sum_squares download");
  sync("sum_squares");
  return h;
}

}  // namespace

void register_elementwise(OpTable& t) {
  t.add = &add;
  t.scale = &scale;
  t.sum_squares = &sum_squares;
}

}  // namespace snug::cuda

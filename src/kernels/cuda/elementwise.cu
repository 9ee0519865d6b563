// Elementwise ops and reductions of kernels/ops.inc: add, scale, sum_squares.
#include "kernels/cuda/context.cuh"
#include "kernels/cuda/sum_squares.cuh"

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

struct AsIs {
  __device__ float operator()(float v) const { return v; }
};

double sum_squares(const float* x, int64_t n) {
  return sum_squares_of(x, n, AsIs{}, "sum_squares");
}

}  // namespace

void register_elementwise(OpTable& t) {
  t.add = &add;
  t.scale = &scale;
  t.sum_squares = &sum_squares;
}

}  // namespace snug::cuda

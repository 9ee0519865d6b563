// Elementwise ops and reductions of kernels/ops.inc: add, scale, sum_squares, sum_squares_each.
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

double sum_squares(const float* x, int64_t n) {
  return sum_squares_of(x, n, AsIs{}, "sum_squares");
}

// One partials buffer serves every vector in turn (the stream orders the launches), each sum
// lands in its slot after it, and the sums come back in one copy and one wait.
void sum_squares_each(double* out, const void* const* xs, const int64_t* ns, const bool* bf16,
                      int64_t count) {
  if (count <= 0) return;
  constexpr int64_t parts = sum_squares_detail::kBlocks;
  Scratch scratch(static_cast<size_t>(parts + count) * sizeof(double));
  double* part = scratch.as<double>();
  double* sums = part + parts;
  for (int64_t i = 0; i < count; ++i) {
    if (bf16[i])
      launch_sum_squares(static_cast<const uint16_t*>(xs[i]), ns[i], Bf16Widen{}, part, sums + i,
                         "sum_squares_each");
    else
      launch_sum_squares(static_cast<const float*>(xs[i]), ns[i], AsIs{}, part, sums + i,
                         "sum_squares_each");
  }
  check(cudaMemcpyAsync(out, sums, static_cast<size_t>(count) * sizeof(double),
                        cudaMemcpyDeviceToHost, stream()),
        "sum_squares_each");
  sync("sum_squares_each");
}

}  // namespace

void register_elementwise(OpTable& t) {
  t.add = &add;
  t.scale = &scale;
  t.sum_squares = &sum_squares;
  t.sum_squares_each = &sum_squares_each;
}

}  // namespace snug::cuda

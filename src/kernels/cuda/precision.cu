// Mixed-precision rounding and packing, and the --bf16-full reductions and rounding
// (kernels/ops.inc): round_to_half, copy_round_half, add_bias_round_half, pack_half, unpack_half,
// round_bf16_stochastic, sum_squares_bf16, scale_bf16. Every conversion is half_bits.cuh's, bit
// for bit the host's; the stochastic rounding draws kernels::random_bits(key, i), so a GPU run
// stores the CPU's bits.
//
// sum_squares_bf16 is deterministic (sum_squares.cuh).
#include "kernels/cuda/context.cuh"
#include "kernels/cuda/half_bits.cuh"
#include "kernels/cuda/sum_squares.cuh"

namespace snug::cuda {

namespace {

#define SNUG_GRID_STRIDE(i, n)                                              \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{gridDim.x} * blockDim.x)

__global__ void copy_round_half_kernel(float* dst, const float* src, int64_t n, bool fp16) {
  SNUG_GRID_STRIDE(i, n) dst[i] = half_to_f32(f32_to_half(src[i], fp16), fp16);
}

// x(N,C) = float(half(x + b)), b broadcast over rows (b null: the rounding alone).
__global__ void add_bias_round_half_kernel(float* x, const float* b, int64_t N, int64_t C,
                                           bool fp16) {
  SNUG_GRID_STRIDE(i, N * C) {
    const float v = b ? x[i] + b[i % C] : x[i];
    x[i] = half_to_f32(f32_to_half(v, fp16), fp16);
  }
}

__global__ void pack_half_kernel(uint16_t* dst, const float* src, int64_t n, bool fp16) {
  SNUG_GRID_STRIDE(i, n) dst[i] = f32_to_half(src[i], fp16);
}

__global__ void unpack_half_kernel(float* dst, const uint16_t* src, int64_t n, bool fp16) {
  SNUG_GRID_STRIDE(i, n) dst[i] = half_to_f32(src[i], fp16);
}

__global__ void round_bf16_stochastic_kernel(uint16_t* dst, const float* src, int64_t n,
                                             uint64_t key) {
  SNUG_GRID_STRIDE(i, n) dst[i] = f32_to_bf16_stochastic(src[i], kernels::random_bits(key, i));
}

__global__ void scale_bf16_kernel(uint16_t* x, float s, int64_t n) {
  SNUG_GRID_STRIDE(i, n) x[i] = f32_to_bf16(bf16_to_f32(x[i]) * s);
}

// part[blockIdx.x] = sum of x^2 over this block's grid-stride slice, in double.
#undef SNUG_GRID_STRIDE

unsigned grid_for(int64_t n) {
  const unsigned b = blocks_for(n);
  return b > 8192 ? 8192 : b;
}

void copy_round_half(float* dst, const float* src, int64_t n, bool fp16) {
  if (n <= 0) return;
  copy_round_half_kernel<<<grid_for(n), 256, 0, stream()>>>(dst, src, n, fp16);
  check_launch("copy_round_half");
}

void round_to_half(float* x, int64_t n, bool fp16) {
  copy_round_half(x, x, n, fp16);
}

void add_bias_round_half(float* x, const float* b, int64_t N, int64_t C, bool fp16) {
  if (N <= 0 || C <= 0) return;
  add_bias_round_half_kernel<<<grid_for(N * C), 256, 0, stream()>>>(x, b, N, C, fp16);
  check_launch("add_bias_round_half");
}

void pack_half(uint16_t* dst, const float* src, int64_t n, bool fp16) {
  if (n <= 0) return;
  pack_half_kernel<<<grid_for(n), 256, 0, stream()>>>(dst, src, n, fp16);
  check_launch("pack_half");
}

void unpack_half(float* dst, const uint16_t* src, int64_t n, bool fp16) {
  if (n <= 0) return;
  unpack_half_kernel<<<grid_for(n), 256, 0, stream()>>>(dst, src, n, fp16);
  check_launch("unpack_half");
}

void round_bf16_stochastic(uint16_t* dst, const float* src, int64_t n, uint64_t key) {
  if (n <= 0) return;
  round_bf16_stochastic_kernel<<<grid_for(n), 256, 0, stream()>>>(dst, src, n, key);
  check_launch("round_bf16_stochastic");
}

void scale_bf16(uint16_t* x, float s, int64_t n) {
  if (n <= 0) return;
  scale_bf16_kernel<<<grid_for(n), 256, 0, stream()>>>(x, s, n);
  check_launch("scale_bf16");
}

double sum_squares_bf16(const uint16_t* x, int64_t n) {
  return sum_squares_of(x, n, Bf16Widen{}, "sum_squares_bf16");
}

}  // namespace

void register_precision(OpTable& t) {
  t.round_to_half = &round_to_half;
  t.copy_round_half = &copy_round_half;
  t.add_bias_round_half = &add_bias_round_half;
  t.pack_half = &pack_half;
  t.unpack_half = &unpack_half;
  t.round_bf16_stochastic = &round_bf16_stochastic;
  t.sum_squares_bf16 = &sum_squares_bf16;
  t.scale_bf16 = &scale_bf16;
}

}  // namespace snug::cuda

// LoRA and NEFTune on the GPU (kernels/ops.inc): lora_forward/backward as the CPU's four thin
// GEMMs (kernels/lora.cpp, same calls in the same order) through the CUDA table's gemm_f32
// (cuBLASLt, gemm.cu); lora_dropout with kernels/dropout_mask.h's mask; add_uniform_noise with
// the CPU's draws: draw i of SplitMix64(seed) is splitmix64_mix(seed + (i + 1) * golden), so each
// element computes its own and the noise is the CPU's bit for bit.
//
// The elementwise arithmetic uses the _rn intrinsics where an add follows a multiply: nvcc would
// otherwise fuse them into one rounding, and the host (-ffp-contract=off) rounds twice.
#include "kernels/cuda/context.cuh"
#include "kernels/cuda/half_bits.cuh"

namespace snug {
const OpTable& cuda_op_table();  // op_table.cu
}  // namespace snug

namespace snug::cuda {

namespace {

__global__ void add_uniform_noise_kernel(float* x, int64_t n, uint64_t seed, double m) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t z = splitmix64_mix(seed + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1));
    const double u = (static_cast<double>(z >> 11) + 1.0) * 0x1.0p-53;  // SplitMix64::uniform
    x[i] = __fadd_rn(x[i], static_cast<float>(__dmul_rn(__dsub_rn(__dmul_rn(2.0, u), 1.0), m)));
  }
}

__global__ void lora_dropout_kernel(uint64_t key, double p, float inv, const float* src, float* dst,
                                    int64_t n, bool accumulate) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float kept = dropout_keep(key, i, p) ? __fmul_rn(src[i], inv) : 0.0f;
    dst[i] = accumulate ? __fadd_rn(dst[i], kept) : kept;
  }
}

unsigned grid_for(int64_t n) {
  const unsigned b = blocks_for(n);
  return b > 8192 ? 8192 : b;
}

// u(N,r) = h A^T ; out(N,OC) += s u B^T.
void lora_forward(float* out, float* u, const float* h, const float* A, const float* B, int64_t N,
                  int64_t IC, int64_t OC, int64_t r, float s) {
  const auto gemm = cuda_op_table().gemm_f32;
  gemm(false, true, N, r, IC, 1.0f, h, IC, A, IC, 0.0f, u, r);
  gemm(false, true, N, OC, r, s, u, r, B, r, 1.0f, out, OC);
}

void lora_backward(float* dh, float* dA, float* dB, float* du, const float* dout, const float* h,
                   const float* u, const float* A, const float* B, int64_t N, int64_t IC,
                   int64_t OC, int64_t r, float s, bool accumulate_dh) {
  const auto gemm = cuda_op_table().gemm_f32;
  if (dB) gemm(true, false, OC, r, N, s, dout, OC, u, r, 1.0f, dB, r);
  gemm(false, false, N, r, OC, s, dout, OC, B, r, 0.0f, du, r);
  if (dA) gemm(true, false, r, IC, N, 1.0f, du, r, h, IC, 1.0f, dA, IC);
  gemm(false, false, N, IC, r, 1.0f, du, r, A, IC, accumulate_dh ? 1.0f : 0.0f, dh, IC);
}

void add_uniform_noise(float* x, int64_t n, uint64_t seed, double m) {
  if (n <= 0) return;
  add_uniform_noise_kernel<<<grid_for(n), 256, 0, stream()>>>(x, n, seed, m);
  check_launch("add_uniform_noise");
}

void lora_dropout(uint64_t key, double p, const float* src, float* dst, int64_t n,
                  bool accumulate) {
  if (n <= 0) return;
  const auto inv = static_cast<float>(1.0 / (1.0 - p));
  lora_dropout_kernel<<<grid_for(n), 256, 0, stream()>>>(key, p, inv, src, dst, n, accumulate);
  check_launch("lora_dropout");
}

}  // namespace

void register_lora(OpTable& t) {
  t.lora_forward = &lora_forward;
  t.lora_backward = &lora_backward;
  t.add_uniform_noise = &add_uniform_noise;
  t.lora_dropout = &lora_dropout;
}

}  // namespace snug::cuda

// LoRA bypass kernels: four thin GEMMs through gemm_f32 (oneDNN). The rank r is small (4-64),
// so each GEMM is memory-bound on the N x IC / N x OC operand, not on FLOPs.
#include "kernels/dropout_mask.h"
#include "kernels/kernels.h"

namespace snug::kernels {

void lora_forward(float* out, float* u, const float* h, const float* A, const float* B, int64_t N,
                  int64_t IC, int64_t OC, int64_t r, float s) {
  gemm_f32(false, true, N, r, IC, 1.0f, h, IC, A, IC, 0.0f, u, r);
  gemm_f32(false, true, N, OC, r, s, u, r, B, r, 1.0f, out, OC);
}

void lora_backward(float* dh, float* dA, float* dB, float* du, const float* dout, const float* h,
                   const float* u, const float* A, const float* B, int64_t N, int64_t IC,
                   int64_t OC, int64_t r, float s, bool accumulate_dh) {
  if (dB) gemm_f32(true, false, OC, r, N, s, dout, OC, u, r, 1.0f, dB, r);
  gemm_f32(false, false, N, r, OC, s, dout, OC, B, r, 0.0f, du, r);
  if (dA) gemm_f32(true, false, r, IC, N, 1.0f, du, r, h, IC, 1.0f, dA, IC);
  gemm_f32(false, false, N, IC, r, 1.0f, du, r, A, IC, accumulate_dh ? 1.0f : 0.0f, dh, IC);
}

void lora_dropout(uint64_t key, double p, const float* src, float* dst, int64_t n,
                  bool accumulate) {
  const float inv = static_cast<float>(1.0 / (1.0 - p));
  for (int64_t i = 0; i < n; ++i) {
    const float kept = lora_keep(key, i, p) ? src[i] * inv : 0.0f;
    dst[i] = accumulate ? dst[i] + kept : kept;
  }
}

}  // namespace snug::kernels

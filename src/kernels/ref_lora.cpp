// Plain reference of the LoRA bypass kernels: the formulas of ops.inc as loops, double sums.
#include "kernels/dropout_mask.h"
#include "kernels/kernels.h"

namespace snug::ref {

void lora_forward(float* out, float* u, const float* h, const float* A, const float* B, int64_t N,
                  int64_t IC, int64_t OC, int64_t r, float s) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < r; ++k) {
      double acc = 0;
      for (int64_t i = 0; i < IC; ++i) acc += static_cast<double>(h[n * IC + i]) * A[k * IC + i];
      u[n * r + k] = static_cast<float>(acc);
    }
    for (int64_t o = 0; o < OC; ++o) {
      double acc = 0;
      for (int64_t k = 0; k < r; ++k) acc += static_cast<double>(u[n * r + k]) * B[o * r + k];
      out[n * OC + o] += static_cast<float>(s * acc);
    }
  }
}

void lora_backward(float* dh, float* dA, float* dB, float* du, const float* dout, const float* h,
                   const float* u, const float* A, const float* B, int64_t N, int64_t IC,
                   int64_t OC, int64_t r, float s, bool accumulate_dh) {
  if (dB)
    for (int64_t o = 0; o < OC; ++o)
      for (int64_t k = 0; k < r; ++k) {
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) acc += static_cast<double>(dout[n * OC + o]) * u[n * r + k];
        dB[o * r + k] += static_cast<float>(s * acc);
      }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < r; ++k) {
      double acc = 0;
      for (int64_t o = 0; o < OC; ++o) acc += static_cast<double>(dout[n * OC + o]) * B[o * r + k];
      du[n * r + k] = static_cast<float>(s * acc);
    }
  if (dA)
    for (int64_t k = 0; k < r; ++k)
      for (int64_t i = 0; i < IC; ++i) {
        double acc = 0;
        for (int64_t n = 0; n < N; ++n) acc += static_cast<double>(du[n * r + k]) * h[n * IC + i];
        dA[k * IC + i] += static_cast<float>(acc);
      }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < IC; ++i) {
      double acc = 0;
      for (int64_t k = 0; k < r; ++k) acc += static_cast<double>(du[n * r + k]) * A[k * IC + i];
      dh[n * IC + i] = static_cast<float>((accumulate_dh ? dh[n * IC + i] : 0.0) + acc);
    }
}

void lora_dropout(uint64_t key, double p, const float* src, float* dst, int64_t n,
                  bool accumulate) {
  for (int64_t i = 0; i < n; ++i) {
    float kept = 0.0f;
    if (kernels::lora_keep(key, i, p)) kept = src[i] * static_cast<float>(1.0 / (1.0 - p));
    if (accumulate)
      dst[i] += kept;
    else
      dst[i] = kept;
  }
}

}  // namespace snug::ref

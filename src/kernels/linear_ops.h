// Internal to the Linear kernels (linear.cpp, linear_nt.cpp): a Linear as GEMMs, for both weight
// layouts and both GEMMs (gemm_f32, gemm_bf16), with the bias in the forward and its gradient
// (column sums) in the backward. Each entry point is one call of linear_forward_on or
// linear_backward_on.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "kernels/parallel_loops.h"

namespace snug::kernels::detail {

// out(N,OC) += b(OC), row by row.
inline void add_bias(float* out, const float* b, int64_t N, int64_t OC) {
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < N; ++n) {
    float* o = out + n * OC;
#pragma omp simd
    for (int64_t j = 0; j < OC; ++j) o[j] += b[j];
  }
}

// db(OC) += column sums of dout(N,OC), parallel over blocks of columns (for_column_blocks). T is
// float, or uint16_t for bf16 bit patterns.
template <typename T>
void add_column_sums(float* db, const T* dout, int64_t N, int64_t OC) {
  for_column_blocks(OC, [&](int64_t o0, int64_t width) {
    double acc[kColumnBlock] = {};
    for (int64_t n = 0; n < N; ++n) {
      const T* d = dout + n * OC + o0;
      if constexpr (sizeof(T) == 2) {
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) acc[j] += bf16_to_f32(d[j]);
      } else {
#pragma omp simd
        for (int64_t j = 0; j < width; ++j) acc[j] += d[j];
      }
    }
    for (int64_t j = 0; j < width; ++j) db[o0 + j] += static_cast<float>(acc[j]);
  });
}

// How a Linear's weight is stored.
enum class WeightLayout {
  in_out,  // w(IC,OC), out = inp @ w: Hugging Face Conv1D (GPT-2)
  out_in,  // w(OC,IC), out = inp @ w^T: nn.Linear
};

// out(N,OC) = inp(N,IC) @ W + b(OC), W = w or w^T by layout; b may be null. gemm is gemm_f32 or
// gemm_bf16 (T its operand type). Product first (beta = 0: out is write-only), then the bias in
// a second pass over out (measured the same as pre-filling out with the bias and beta = 1).
template <typename T, typename Gemm>
void linear_forward_on(Gemm gemm, WeightLayout layout, float* out, const T* inp, const T* w,
                       const float* b, int64_t N, int64_t IC, int64_t OC) {
  const bool nt = layout == WeightLayout::out_in;
  gemm(false, nt, N, OC, IC, 1.0f, inp, IC, w, nt ? IC : OC, 0.0f, out, OC);
  if (b) add_bias(out, b, N, OC);
}

// dinp(N,IC) = dout @ W^T (with dinp_beta = 1: +=); dW += the product of inp and dout in w's
// layout (in_out: inp^T @ dout, out_in: dout^T @ inp); db(OC) += column sums of dout. A null
// output is skipped.
template <typename T, typename Gemm>
void linear_backward_on(Gemm gemm, WeightLayout layout, float* dinp, float* dw, float* db,
                        const T* dout, const T* inp, const T* w, int64_t N, int64_t IC, int64_t OC,
                        float dinp_beta) {
  const bool nt = layout == WeightLayout::out_in;
  if (dinp) gemm(false, !nt, N, IC, OC, 1.0f, dout, OC, w, nt ? IC : OC, dinp_beta, dinp, IC);
  if (dw) {
    if (nt)
      gemm(true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dw, IC);
    else
      gemm(true, false, IC, OC, N, 1.0f, inp, IC, dout, OC, 1.0f, dw, OC);
  }
  if (db) add_column_sums(db, dout, N, OC);
}

}  // namespace snug::kernels::detail

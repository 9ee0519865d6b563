// Linear layer (Hugging Face Conv1D layout) on top of gemm_f32, or gemm_bf16 for bf16 operands.
#include "kernels/bias_ops.h"
#include "kernels/kernels.h"

namespace snug::kernels {

void linear_forward(float* out, const float* inp, const float* w, const float* b, int64_t N,
                    int64_t IC, int64_t OC) {
  // Product first (beta = 0: out is write-only), then the bias in a second pass over out.
  // (Measured the same as pre-filling out with the bias and using beta = 1.)
  gemm_f32(false, false, N, OC, IC, 1.0f, inp, IC, w, OC, 0.0f, out, OC);
  if (b) detail::add_bias(out, b, N, OC);
}

void linear_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                     const float* w, int64_t N, int64_t IC, int64_t OC) {
  if (dinp) gemm_f32(false, true, N, IC, OC, 1.0f, dout, OC, w, OC, 0.0f, dinp, IC);
  if (dw) gemm_f32(true, false, IC, OC, N, 1.0f, inp, IC, dout, OC, 1.0f, dw, OC);
  if (db) detail::add_column_sums(db, dout, N, OC);
}

void linear_forward_bf16(float* out, const uint16_t* inp, const uint16_t* w, const float* b,
                         int64_t N, int64_t IC, int64_t OC) {
  gemm_bf16(false, false, N, OC, IC, 1.0f, inp, IC, w, OC, 0.0f, out, OC);
  if (b) detail::add_bias(out, b, N, OC);
}

void linear_backward_bf16(float* dinp, float* dw, float* db, const uint16_t* dout,
                          const uint16_t* inp, const uint16_t* w, int64_t N, int64_t IC,
                          int64_t OC) {
  if (dinp) gemm_bf16(false, true, N, IC, OC, 1.0f, dout, OC, w, OC, 0.0f, dinp, IC);
  if (dw) gemm_bf16(true, false, IC, OC, N, 1.0f, inp, IC, dout, OC, 1.0f, dw, OC);
  if (db) detail::add_column_sums(db, dout, N, OC);
}

}  // namespace snug::kernels

// Linear in nn.Linear layout (weight (out, in)) on top of gemm_f32: the layout of every family
// but GPT-2 (whose Conv1D layout is linear.cpp).
#include "kernels/bias_ops.h"
#include "kernels/kernels.h"

namespace snug::kernels {

void linear_nt_forward(float* out, const float* inp, const float* w, const float* b, int64_t N,
                       int64_t IC, int64_t OC) {
  gemm_f32(false, true, N, OC, IC, 1.0f, inp, IC, w, IC, 0.0f, out, OC);
  if (b) detail::add_bias(out, b, N, OC);
}

void linear_nt_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, int64_t N, int64_t IC, int64_t OC, bool accumulate_dinp) {
  if (dinp)
    gemm_f32(false, false, N, IC, OC, 1.0f, dout, OC, w, IC, accumulate_dinp ? 1.0f : 0.0f, dinp,
             IC);
  if (dw) gemm_f32(true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dw, IC);
  if (db) detail::add_column_sums(db, dout, N, OC);
}

}  // namespace snug::kernels

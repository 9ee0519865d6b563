// Linear in nn.Linear layout (weight (out, in)) on top of gemm_f32, or gemm_bf16 for bf16
// operands (kernels/linear_ops.h): the layout of every family but GPT-2 (whose Conv1D layout is
// linear.cpp).
#include "kernels/kernels.h"
#include "kernels/linear_ops.h"

namespace snug::kernels {

void linear_nt_forward(float* out, const float* inp, const float* w, const float* b, int64_t N,
                       int64_t IC, int64_t OC) {
  detail::linear_forward_on(gemm_f32, detail::WeightLayout::out_in, out, inp, w, b, N, IC, OC);
}

void linear_nt_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, int64_t N, int64_t IC, int64_t OC, bool accumulate_dinp) {
  detail::linear_backward_on(gemm_f32, detail::WeightLayout::out_in, dinp, dw, db, dout, inp, w, N,
                             IC, OC, accumulate_dinp ? 1.0f : 0.0f);
}

void linear_nt_forward_bf16(float* out, const uint16_t* inp, const uint16_t* w, const float* b,
                            int64_t N, int64_t IC, int64_t OC) {
  detail::linear_forward_on(gemm_bf16, detail::WeightLayout::out_in, out, inp, w, b, N, IC, OC);
}

void linear_nt_backward_bf16(float* dinp, float* dw, float* db, const uint16_t* dout,
                             const uint16_t* inp, const uint16_t* w, int64_t N, int64_t IC,
                             int64_t OC, bool accumulate_dinp) {
  detail::linear_backward_on(gemm_bf16, detail::WeightLayout::out_in, dinp, dw, db, dout, inp, w, N,
                             IC, OC, accumulate_dinp ? 1.0f : 0.0f);
}

}  // namespace snug::kernels

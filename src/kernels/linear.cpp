// Linear layer (Hugging Face Conv1D layout, w(IC,OC)) on top of gemm_f32, or gemm_bf16 for bf16
// operands (kernels/linear_ops.h).
#include "kernels/kernels.h"
#include "kernels/linear_ops.h"

namespace snug::kernels {

using detail::WeightLayout;

void linear_forward(float* out, const float* inp, const float* w, const float* b, int64_t N,
                    int64_t IC, int64_t OC) {
  detail::linear_forward_on(gemm_f32, WeightLayout::in_out, out, inp, w, b, N, IC, OC);
}

void linear_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                     const float* w, int64_t N, int64_t IC, int64_t OC) {
  detail::linear_backward_on(gemm_f32, WeightLayout::in_out, dinp, dw, db, dout, inp, w, N, IC, OC,
                             0.0f);
}

void linear_forward_bf16(float* out, const uint16_t* inp, const uint16_t* w, const float* b,
                         int64_t N, int64_t IC, int64_t OC) {
  detail::linear_forward_on(gemm_bf16, WeightLayout::in_out, out, inp, w, b, N, IC, OC);
}

void linear_backward_bf16(float* dinp, float* dw, float* db, const uint16_t* dout,
                          const uint16_t* inp, const uint16_t* w, int64_t N, int64_t IC,
                          int64_t OC) {
  detail::linear_backward_on(gemm_bf16, WeightLayout::in_out, dinp, dw, db, dout, inp, w, N, IC, OC,
                             0.0f);
}

}  // namespace snug::kernels

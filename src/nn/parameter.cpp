#include "nn/parameter.h"

namespace snug {

float* Parameter::grad_for_accumulation() {
  if (!grad.defined())
    grad = Tensor::zeros(value.shape(), DType::f32, Category::gradients, value.device());
  return grad.data<float>();
}

int64_t count_params(const ParameterList& params, bool trainable_only) {
  int64_t n = 0;
  for (const Parameter* p : params)
    if (!trainable_only || p->requires_grad) n += p->value.numel();
  return n;
}

}  // namespace snug

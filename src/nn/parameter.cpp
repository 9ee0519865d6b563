#include "nn/parameter.h"

#include "quant/weight_quant.h"

namespace snug {

float* Parameter::grad_for_accumulation() {
  if (!grad.defined())
    grad = Tensor::zeros(value.shape(), DType::f32, grad_category, value.device());
  return grad.data<float>();
}

int64_t Parameter::numel() const {
  if (quant) return quant->numel;
  return partitioned && !value.defined() ? shape_numel(*partitioned) : value.numel();
}

const Shape& Parameter::shape() const {
  if (quant) return quant->shape;
  return partitioned && !value.defined() ? *partitioned : value.shape();
}

DType Parameter::dtype() const {
  if (quant) return DType::f32;
  return sliced() ? shard.dtype() : value.dtype();
}

int64_t count_params(const ParameterList& params, bool trainable_only) {
  int64_t n = 0;
  for (const Parameter* p : params)
    if (!trainable_only || p->requires_grad) n += p->numel();
  return n;
}

}  // namespace snug

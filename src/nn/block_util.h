// Small helpers every block uses: where its tensors come from and how kernel arguments are formed.
// Nothing here asks which device runs: on meta, data pointers are null and the meta op table
// ignores them; the allocations are what a meta run measures. Parameter values and gradients go
// through the RunContext (nn/run_context.h), which knows their storage dtype.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "nn/parameter.h"

namespace snug::nn {

// What forward keeps for backward (category activations).
inline Tensor activation(Device& dev, const Shape& shape) {
  return Tensor::empty(shape, DType::f32, Category::activations, dev);
}
// Gradients of activations and other short-lived work (category temporary).
inline Tensor temporary(Device& dev, const Shape& shape) {
  return Tensor::empty(shape, DType::f32, Category::temporary, dev);
}
// fp32 data of t, nullptr for an undefined tensor (and on meta).
inline float* f32(const Tensor& t) {
  return t.defined() ? t.data<float>() : nullptr;
}
// p + n, or nullptr for a null p: column slices of a fused tensor (e.g. k inside [q|k|v]).
inline float* offset(float* p, int64_t n) {
  return p ? p + n : nullptr;
}
// The fp32 value of an fp32 parameter, nullptr for an absent one (e.g. no bias) or on meta.
inline const float* value_of(const Parameter* p) {
  return p ? p->value.data<float>() : nullptr;
}

}  // namespace snug::nn

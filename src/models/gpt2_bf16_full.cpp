// GPT2 with bf16 parameters (--bf16-full; GPT2::param_dtype() in gpt2.h, docs/mixed-precision.md):
// reading bf16 values as fp32 for the kernels, and the fp32 gradient accumulators of backward.
#include <algorithm>

#include "core/error.h"
#include "kernels/kernels.h"
#include "models/gpt2_internal.h"
#include "models/param_view.h"

namespace snug {

namespace K = snug::kernels;

namespace {
constexpr int64_t kChunk = 4096;  // floats per host-buffer chunk (16 KiB)
}  // namespace

VectorF32::VectorF32(const Parameter* p) {
  if (p == nullptr || p->value.is_meta()) return;
  if (p->value.dtype() == DType::f32) {
    ptr_ = p->value.data<float>();
    return;
  }
  SNUG_CHECK(p->value.ndim() == 1, "VectorF32: '", p->name, "' is not a vector (",
             shape_str(p->value.shape()), ")");
  buf_.resize(static_cast<size_t>(p->value.numel()));
  K::unpack_half(buf_.data(), p->value.data_u16(), p->value.numel(), false);
  ptr_ = buf_.data();
}

void fill_values(Parameter& p, const std::function<void(float*, int64_t)>& fill) {
  if (p.value.is_meta()) return;
  const int64_t n = p.value.numel();
  if (p.value.dtype() == DType::f32) {
    fill(p.value.data<float>(), n);
    return;
  }
  SNUG_CHECK(p.value.dtype() == DType::bf16, "fill_values: '", p.name, "' is ",
             dtype_name(p.value.dtype()), ", expected f32 or bf16");
  std::vector<float> buf(static_cast<size_t>(kChunk));
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t len = std::min(kChunk, n - c);
    fill(buf.data(), len);
    K::pack_half(p.value.data_u16() + c, buf.data(), len, false);
  }
}

const float* GPT2::param_f32(const Parameter* p, Tensor& scratch) const {
  if (p->value.dtype() == DType::f32) return dev_->is_meta() ? nullptr : p->value.data<float>();
  scratch = Tensor::empty(p->value.shape(), DType::f32, Category::temporary, *dev_);
  if (dev_->is_meta()) return nullptr;
  K::unpack_half(scratch.data<float>(), p->value.data_u16(), p->value.numel(), false);
  return scratch.data<float>();
}

float* GPT2::grad_buffer(Parameter* p) {
  if (p->value.dtype() == DType::f32) return p->grad_for_accumulation();
  const bool real = !dev_->is_meta();
  for (auto& [q, acc] : grad_acc_)
    if (q == p) return real ? acc.data<float>() : nullptr;
  // Accumulation across micro-steps continues from the bf16 gradient kept so far.
  Tensor acc = Tensor::empty(p->value.shape(), DType::f32, Category::temporary, *dev_);
  if (real) {
    if (p->grad.defined())
      K::unpack_half(acc.data<float>(), p->grad.data_u16(), acc.numel(), false);
    else
      acc.zero_();
  }
  grad_acc_.emplace_back(p, std::move(acc));
  return real ? grad_acc_.back().second.data<float>() : nullptr;
}

void GPT2::flush_grads() {
  for (auto& [p, acc] : grad_acc_) {
    if (!p->grad.defined())
      p->grad = Tensor::empty(p->value.shape(), DType::bf16, Category::gradients, *dev_);
    if (!dev_->is_meta()) K::pack_half(p->grad.data_u16(), acc.data<float>(), acc.numel(), false);
    acc.reset();  // one accumulator at a time back to the pool
  }
  grad_acc_.clear();
}

}  // namespace snug

#include "nn/run_context.h"

#include "core/error.h"
#include "core/random.h"
#include "kernels/dropout_mask.h"
#include "kernels/op_table.h"
#include "quant/weight_quant.h"

namespace snug::nn {

VectorF32::VectorF32(const Parameter* p, Device& dev) {
  if (p == nullptr) return;
  if (p->value.dtype() == DType::f32) {
    ptr_ = p->value.data<float>();
    return;
  }
  SNUG_CHECK(p->value.ndim() == 1, "VectorF32: '", p->name, "' is not a vector (",
             shape_str(p->value.shape()), ")");
  buf_ = Tensor::empty(p->value.shape(), DType::f32, Category::temporary, dev);
  dev.ops().unpack_half(buf_.data<float>(), p->value.data_u16(), p->value.numel(),
                        p->value.dtype() == DType::f16);
  ptr_ = buf_.data<float>();
}

uint64_t RunContext::dropout_key(int64_t layer, int site) const {
  uint64_t h = splitmix64_mix(dropout_seed ^ 0x64726f706f7574ull);
  h = splitmix64_mix(h ^ forward_count);
  h = splitmix64_mix(h ^ static_cast<uint64_t>(layer + 1024));
  return splitmix64_mix(h ^ static_cast<uint64_t>(site));
}

uint64_t RunContext::at_first_row(uint64_t key, int64_t n) const {
  if (first_row == 0) return key;
  SNUG_ASSERT(batch_rows > 0 && n % batch_rows == 0, n, " elements are not rows of the batch's ",
              batch_rows);
  return kernels::counter_key_at(key, first_row * (n / batch_rows));
}

Tensor RunContext::work(const Shape& shape) const {
  return Tensor::empty(shape, DType::f32,
                       low_precision() ? Category::temporary : Category::activations, *dev_);
}

void RunContext::round_half(const Tensor& t) const {
  if (low_precision() && t.defined()) ops().round_to_half(t.data<float>(), t.numel(), fp16());
}

bool RunContext::gemm_inputs_stay_bf16() const {
  return compute == ComputeDType::bf16 && gemm_path == kernels::GemmPath::onednn_bf16 &&
         !has_lora && !has_nn_linear;
}

void RunContext::compact(std::initializer_list<Tensor*> ts) const {
  if (!low_precision()) return;
  for (Tensor* t : ts) {
    if (!t->defined() || t->dtype() != DType::f32) continue;
    Tensor h = Tensor::empty(t->shape(), storage_dtype(), Category::activations, *dev_);
    ops().pack_half(h.data_u16(), t->data<float>(), t->numel(), fp16());
    *t = std::move(h);
  }
}

void RunContext::widen(std::initializer_list<Tensor*> ts, bool gemm_inputs) const {
  if (!low_precision() || (gemm_inputs && gemm_inputs_stay_bf16())) return;
  for (Tensor* t : ts) {
    if (!t->defined() || t->dtype() == DType::f32) continue;
    Tensor w = Tensor::empty(t->shape(), DType::f32, Category::temporary, *dev_);
    ops().unpack_half(w.data<float>(), t->data_u16(), t->numel(), fp16());
    *t = std::move(w);
  }
}

Tensor RunContext::to_bf16(const Tensor& t) const {
  if (t.dtype() == DType::bf16) return t;
  Tensor h = Tensor::empty(t.shape(), DType::bf16, Category::temporary, *dev_);
  ops().pack_half(h.data_u16(), t.data<float>(), t.numel(), false);
  return h;
}

Tensor RunContext::half_grad(const Tensor& g, const Parameter* w, bool fp32_reader) const {
  if (!low_precision()) return g;
  if (bf16_gemm(w) && !fp32_reader) return to_bf16(g);
  Tensor h = Tensor::empty(g.shape(), DType::f32, Category::temporary, *dev_);
  ops().copy_round_half(h.data<float>(), g.data<float>(), g.numel(), fp16());
  return h;
}

void RunContext::cast_compute_weights(const std::vector<const Parameter*>& weights) {
  compute_weights_.clear();
  if (!low_precision()) return;
  for (const Parameter* p : weights) {
    // Partitioned (ZeRO 3) weights are 16-bit already when the compute is (train/trainer.cpp).
    if (p->quantized() || p->partitioned || p->value.dtype() != DType::f32) continue;
    Tensor h = Tensor::empty(p->value.shape(), storage_dtype(), Category::weights, *dev_);
    ops().pack_half(h.data_u16(), p->value.data<float>(), h.numel(), fp16());
    compute_weights_.add(p, std::move(h));
  }
}

bool RunContext::bf16_gemm(const Parameter* p) const {
  if (gemm_path != kernels::GemmPath::onednn_bf16) return false;
  return compute == ComputeDType::bf16 || (p->quantized() && dequant_bf16);
}

const float* RunContext::gemm_weight(const Parameter* p, Tensor& scratch) const {
  if (p->quantized()) {
    // --load-in-8bit/4bit: dequantized per use into a temporary, rounded to the compute dtype.
    scratch = Tensor::empty(p->shape(), DType::f32, Category::temporary, *dev_);
    dequantize_weight(*p->quant, scratch.data<float>());
    if (low_precision())
      ops().round_to_half(scratch.data<float>(), scratch.numel(), fp16());
    else if (dequant_bf16)
      ops().round_to_half(scratch.data<float>(), scratch.numel(), false);
    return scratch.data<float>();
  }
  if (p->value.dtype() != DType::f32) return param_f32(p, scratch);  // --bf16-full
  if (!low_precision()) return p->value.data<float>();
  if (const Tensor* half = compute_weights_.find(p)) {
    scratch = Tensor::empty(half->shape(), DType::f32, Category::temporary, *dev_);
    ops().unpack_half(scratch.data<float>(), half->data_u16(), half->numel(), fp16());
    return scratch.data<float>();
  }
  throw Error(detail::concat("no compute copy of ", p->name,
                             " (forward casts them; backward needs the same forward)"));
}

const uint16_t* RunContext::gemm_weight16(const Parameter* p, Tensor& scratch) const {
  if (p->quantized()) {
    // Dequantized into an fp32 temporary, then packed (rounded) into the bf16 scratch.
    Tensor f32 = Tensor::empty(p->shape(), DType::f32, Category::temporary, *dev_);
    scratch = Tensor::empty(p->shape(), DType::bf16, Category::temporary, *dev_);
    dequantize_weight(*p->quant, f32.data<float>());
    ops().pack_half(scratch.data_u16(), f32.data<float>(), scratch.numel(), false);
    return scratch.data_u16();
  }
  if (p->value.dtype() == DType::bf16) return p->value.data_u16();
  SNUG_CHECK(p->value.dtype() == DType::f32, "the bf16 GEMM path cannot read ", p->name, " (",
             dtype_name(p->value.dtype()), ")");
  if (const Tensor* half = compute_weights_.find(p)) return half->data_u16();
  throw Error(detail::concat("no bf16 compute copy of ", p->name,
                             " (forward casts them; backward needs the same forward)"));
}

const float* RunContext::param_f32(const Parameter* p, Tensor& scratch) const {
  if (p->value.dtype() == DType::f32) return p->value.data<float>();
  scratch = Tensor::empty(p->value.shape(), DType::f32, Category::temporary, *dev_);
  ops().unpack_half(scratch.data<float>(), p->value.data_u16(), p->value.numel(),
                    p->value.dtype() == DType::f16);
  return scratch.data<float>();
}

float* RunContext::grad(Parameter* p) {
  if (p == nullptr || !p->requires_grad) return nullptr;
  if (p->value.dtype() == DType::f32) return p->grad_for_accumulation();
  SNUG_CHECK(p->value.dtype() == DType::bf16, p->name, ": ", dtype_name(p->value.dtype()),
             " parameters do not train (a 16-bit base is frozen under LoRA; --bf16-full trains "
             "bf16)");
  if (const Tensor* acc = grad_acc_.find(p)) return acc->data<float>();
  // Accumulation across micro-steps continues from the bf16 gradient kept so far.
  Tensor acc = Tensor::zeros(p->value.shape(), DType::f32, Category::temporary, *dev_);
  if (p->grad.defined())
    ops().unpack_half(acc.data<float>(), p->grad.data_u16(), acc.numel(), false);
  return grad_acc_.add(p, std::move(acc)).data<float>();
}

void RunContext::flush_grads() {
  for (auto& [p, acc] : grad_acc_.items()) {
    // The accumulator's shape: at ZeRO stage 3 the block may have released p's value already.
    if (!p->grad.defined())
      p->grad = Tensor::empty(acc.shape(), DType::bf16, p->grad_category, *dev_);
    ops().pack_half(p->grad.data_u16(), acc.data<float>(), acc.numel(), false);
    acc.reset();  // one accumulator at a time back to the pool
  }
  grad_acc_.clear();
}

}  // namespace snug::nn

// GPT2 under mixed precision: 16-bit compute copies of the GEMM weights and 16-bit storage of
// the saved activations (see ComputeDType in gpt2.h and docs/mixed-precision.md).
#include <algorithm>

#include "core/error.h"
#include "kernels/kernels.h"
#include "models/gpt2_internal.h"

namespace snug {

namespace K = snug::kernels;

namespace {
DType storage_dtype(ComputeDType d) {
  return d == ComputeDType::f16 ? DType::f16 : DType::bf16;
}
}  // namespace

int64_t GPT2::num_compute_copy_params() const {
  if (param_dtype_ != DType::f32) return 0;  // --bf16-full: the parameters are the copies
  int64_t n = wte_->value.numel();
  for (const Layer& w : layers_)
    for (const Parameter* p : {w.qkv_w, w.attproj_w, w.fc_w, w.fcproj_w})
      if (!p->quantized()) n += p->numel();  // quantized: dequantized per use instead
  return n;
}

void GPT2::round_half(const Tensor& t) const {
  if (low_precision() && t.defined() && !dev_->is_meta())
    K::round_to_half(t.data<float>(), t.numel(), compute_ == ComputeDType::f16);
}

void GPT2::compact(GPT2LayerActivations& a) const {
  if (!low_precision()) return;
  const bool fp16 = compute_ == ComputeDType::f16;
  for_each_half(a, [&](Tensor& t) {
    if (!t.defined() || t.dtype() != DType::f32) return;
    Tensor h = Tensor::empty(t.shape(), storage_dtype(compute_), Category::activations, *dev_);
    if (!dev_->is_meta()) K::pack_half(h.data_u16(), t.data<float>(), t.numel(), fp16);
    t = std::move(h);
  });
}

bool GPT2::gemm_inputs_stay_bf16() const {
  return compute_ == ComputeDType::bf16 && gemm_path_ == kernels::GemmPath::onednn_bf16 &&
         lora_.empty();
}

void GPT2::widen(GPT2LayerActivations& a) const {
  if (!low_precision()) return;
  const bool fp16 = compute_ == ComputeDType::f16;
  const bool keep = gemm_inputs_stay_bf16();
  for_each_half(a, [&](Tensor& t) {
    if (!t.defined() || t.dtype() == DType::f32) return;
    if (keep && (&t == &a.ln1 || &t == &a.ln2 || &t == &a.fch_gelu)) return;
    Tensor w = Tensor::empty(t.shape(), DType::f32, Category::temporary, *dev_);
    if (!dev_->is_meta()) K::unpack_half(w.data<float>(), t.data_u16(), t.numel(), fp16);
    t = std::move(w);
  });
}

void GPT2::cast_compute_weights() {
  compute_weights_.clear();
  if (!low_precision() || param_dtype_ != DType::f32) return;
  const bool fp16 = compute_ == ComputeDType::f16;
  auto cast = [&](const Parameter* p) {
    Tensor h = Tensor::empty(p->value.shape(), storage_dtype(compute_), Category::weights, *dev_);
    if (!dev_->is_meta()) K::pack_half(h.data_u16(), p->value.data<float>(), h.numel(), fp16);
    compute_weights_.emplace_back(p, std::move(h));
  };
  cast(wte_);
  for (const Layer& w : layers_)
    for (const Parameter* p : {w.qkv_w, w.attproj_w, w.fc_w, w.fcproj_w})
      if (!p->quantized()) cast(p);
}

void GPT2::free_compute_weights() {
  compute_weights_.clear();
}

const float* GPT2::gemm_weight(const Parameter* p, Tensor& scratch) const {
  if (p->quantized()) {
    // --load-in-8bit/4bit: dequantized per use into a temporary, rounded to the compute dtype.
    scratch = Tensor::empty(p->shape(), DType::f32, Category::temporary, *dev_);
    if (dev_->is_meta()) return nullptr;
    dequantize_weight(*p->quant, scratch.data<float>());
    if (low_precision())
      K::round_to_half(scratch.data<float>(), scratch.numel(), compute_ == ComputeDType::f16);
    else if (dequant_bf16_)
      K::round_to_half(scratch.data<float>(), scratch.numel(), false);
    return scratch.data<float>();
  }
  if (p->value.dtype() != DType::f32) return param_f32(p, scratch);  // --bf16-full
  if (!low_precision()) return dev_->is_meta() ? nullptr : p->value.data<float>();
  for (const auto& [param, half] : compute_weights_) {
    if (param != p) continue;
    scratch = Tensor::empty(half.shape(), DType::f32, Category::temporary, *dev_);
    if (dev_->is_meta()) return nullptr;
    K::unpack_half(scratch.data<float>(), half.data_u16(), half.numel(),
                   compute_ == ComputeDType::f16);
    return scratch.data<float>();
  }
  throw Error(detail::concat("GPT2: no compute copy of ", p->name,
                             " (forward casts them; backward needs the same forward)"));
}

bool GPT2::bf16_gemm(const Parameter* p) const {
  if (gemm_path_ != kernels::GemmPath::onednn_bf16) return false;
  return compute_ == ComputeDType::bf16 || (p->quantized() && dequant_bf16_);
}

const uint16_t* GPT2::gemm_weight16(const Parameter* p, Tensor& scratch) const {
  if (p->quantized()) {
    // Dequantized into an fp32 temporary, then packed (rounded) into the bf16 scratch.
    Tensor f32 = Tensor::empty(p->shape(), DType::f32, Category::temporary, *dev_);
    scratch = Tensor::empty(p->shape(), DType::bf16, Category::temporary, *dev_);
    if (dev_->is_meta()) return nullptr;
    dequantize_weight(*p->quant, f32.data<float>());
    K::pack_half(scratch.data_u16(), f32.data<float>(), scratch.numel(), false);
    return scratch.data_u16();
  }
  if (p->value.dtype() == DType::bf16) return dev_->is_meta() ? nullptr : p->value.data_u16();
  for (const auto& [param, half] : compute_weights_)
    if (param == p) return dev_->is_meta() ? nullptr : half.data_u16();
  throw Error(detail::concat("GPT2: no bf16 compute copy of ", p->name,
                             " (forward casts them; backward needs the same forward)"));
}

Tensor GPT2::to_bf16(const Tensor& t) const {
  if (t.dtype() == DType::bf16) return t;
  Tensor h = Tensor::empty(t.shape(), DType::bf16, Category::temporary, *dev_);
  if (!dev_->is_meta()) K::pack_half(h.data_u16(), t.data<float>(), t.numel(), false);
  return h;
}

void GPT2::read_values(const Parameter& p, float* out) const {
  SNUG_CHECK(!dev_->is_meta(), "read_values: ", p.name, " is on the meta device (no values)");
  if (p.quantized()) {
    dequantize_weight(*p.quant, out);
  } else if (p.value.dtype() == DType::f32) {
    std::copy_n(p.value.data<float>(), p.numel(), out);
  } else {
    K::unpack_half(out, p.value.data_u16(), p.numel(), p.value.dtype() == DType::f16);
  }
}

}  // namespace snug

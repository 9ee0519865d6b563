#include "nn/linear.h"

#include "core/error.h"
#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

Linear::Linear(ParameterStore& ps, const std::string& prefix, int64_t in_features,
               int64_t out_features, bool bias, LinearLayout layout)
    : ctx_(&ps.context()), name_(prefix), in_(in_features), out_(out_features), layout_(layout) {
  SNUG_CHECK(in_ > 0 && out_ > 0, prefix, ": Linear sizes ", in_, " -> ", out_,
             " must be positive");
  const Shape shape = layout == LinearLayout::conv1d ? Shape{in_, out_} : Shape{out_, in_};
  w_ = ps.add(prefix + ".weight", shape, true, /*quantizable=*/true);
  if (bias) b_ = ps.add(prefix + ".bias", {out_}, false);
  if (layout == LinearLayout::linear) ctx_->has_nn_linear = true;
}

const LoraAdapter& Linear::add_lora(ParameterStore& ps, int64_t r, int64_t layer, int slot) {
  SNUG_CHECK(!lora_, name_, ": has a LoRA adapter already");
  Parameter* A = ps.add_f32(name_ + ".lora_A.weight", {r, in_}, true);
  Parameter* B = ps.add_f32(name_ + ".lora_B.weight", {out_, r}, true);
  lora_ = LoraAdapter{name_, w_, A, B, layer, slot, layout_ == LinearLayout::conv1d};
  return *lora_;
}

bool Linear::bf16_path() const {
  // Both layouts have 16-bit Linear ops (linear_forward_bf16 for GPT-2's Conv1D,
  // linear_nt_forward_bf16 for nn.Linear).
  return ctx_->bf16_gemm(w_);
}

void Linear::forward(const Tensor& in, const Tensor& out, Saved& s) const {
  RunContext& c = *ctx_;
  const OpTable& ops = c.ops();
  const int64_t N = in.numel() / in_;
  SNUG_ASSERT(in.numel() == N * in_ && out.numel() == N * out_, "Linear shapes");
  const VectorF32 bias = c.vector_f32(b_);
  // A 16-bit output without an adapter to add first: bias and rounding in one pass (the same
  // operations as the GEMM's own bias pass followed by round_half).
  const bool bias_rounds = c.low_precision() && !lora_;
  const float* gemm_bias = bias_rounds ? nullptr : bias.get();
  {
    Tensor scratch;
    if (bf16_path()) {
      const uint16_t* W = c.gemm_weight16(w_, scratch);
      const Tensor in16 = c.to_bf16(in);
      const auto fwd16 =
          layout_ == LinearLayout::conv1d ? ops.linear_forward_bf16 : ops.linear_nt_forward_bf16;
      fwd16(f32(out), in16.data_u16(), W, gemm_bias, N, in_, out_);
    } else if (layout_ == LinearLayout::conv1d) {
      const float* W = c.gemm_weight(w_, scratch);
      ops.linear_forward(f32(out), f32(in), W, gemm_bias, N, in_, out_);
    } else {
      const float* W = c.gemm_weight(w_, scratch);
      ops.linear_nt_forward(f32(out), f32(in), W, gemm_bias, N, in_, out_);
    }
  }
  if (bias_rounds) {
    ops.add_bias_round_half(f32(out), bias.get(), N, out_, c.fp16());
    s.in = in;
    return;
  }
  if (lora_) {
    const int64_t r = lora_->A->value.dim(0);
    const double p = c.lora.dropout;
    const Tensor* h = &in;
    if (c.training && p > 0) {
      // h = x * mask / (1 - p), kept for A's gradient (the mask itself is recomputed).
      s.lora_in = activation(c.device(), in.shape());
      ops.lora_dropout(
          c.at_first_row(lora_dropout_key(c.lora_seed, c.forward_count, lora_->layer, lora_->slot),
                         N * in_),
          p, f32(in), f32(s.lora_in), N * in_, false);
      h = &s.lora_in;
    }
    Shape ush = in.shape();
    ush.back() = r;
    s.lora_u = activation(c.device(), ush);
    ops.lora_forward(f32(out), f32(s.lora_u), f32(*h), value_of(lora_->A), value_of(lora_->B), N,
                     in_, out_, r, static_cast<float>(c.lora.scaling()));
  }
  c.round_half(out);
  s.in = in;
}

void Linear::backward(const Tensor& dout, Saved& s, const Tensor& din, bool accumulate_din) const {
  RunContext& c = *ctx_;
  const OpTable& ops = c.ops();
  const int64_t N = dout.numel() / out_;
  float* dw = c.grad(w_);
  float* db = c.grad(b_);
  {
    Tensor ws;
    if (bf16_path()) {
      const uint16_t* W = c.gemm_weight16(w_, ws);
      const Tensor dout16 = c.to_bf16(dout);
      const bool trains = w_->requires_grad;
      const Tensor in16 = trains ? c.to_bf16(s.in) : Tensor();  // frozen: no dW
      const uint16_t* x16 = trains ? in16.data_u16() : nullptr;
      if (layout_ == LinearLayout::linear) {
        ops.linear_nt_backward_bf16(f32(din), dw, db, dout16.data_u16(), x16, W, N, in_, out_,
                                    accumulate_din);
      } else {
        SNUG_ASSERT(!accumulate_din, "bf16 Conv1D backward accumulates no input gradient");
        ops.linear_backward_bf16(f32(din), dw, db, dout16.data_u16(), x16, W, N, in_, out_);
      }
    } else if (layout_ == LinearLayout::linear) {
      const float* W = c.gemm_weight(w_, ws);
      // Off the bf16 GEMM path (a weight that bf16_gemm() leaves in fp32) the input and dout may
      // still come bf16 (saved activations, half_grad): widen them (temporaries holding the
      // same bf16 values).
      Tensor in = s.in, g = dout;
      if (in.dtype() != DType::f32) c.widen({&in}, false);
      if (g.dtype() != DType::f32) c.widen({&g}, false);
      ops.linear_nt_backward(f32(din), dw, db, f32(g), f32(in), W, N, in_, out_, accumulate_din);
    } else if (!accumulate_din) {
      const float* W = c.gemm_weight(w_, ws);
      ops.linear_backward(f32(din), dw, db, f32(dout), f32(s.in), W, N, in_, out_);
    } else {
      // Conv1D with an input gradient to add onto: din += dout W^T, then the parameter gradients.
      const float* W = c.gemm_weight(w_, ws);
      ops.gemm_f32(false, true, N, in_, out_, 1.0f, f32(dout), out_, W, out_, 1.0f, f32(din), in_);
      ops.linear_backward(nullptr, dw, db, f32(dout), f32(s.in), W, N, in_, out_);
    }
  }
  if (lora_) {
    // dB += s dy^T u; du = s dy B; dA += du^T h; dx += mask(du A) / (1 - p). The frozen base
    // passed its input gradient through above, so checkpointing needs no extra hook.
    const int64_t r = lora_->A->value.dim(0);
    const bool dropped = s.lora_in.defined();
    const Tensor& h = dropped ? s.lora_in : s.in;
    float* dA = c.grad(lora_->A);
    float* dB = c.grad(lora_->B);
    Tensor du = temporary(c.device(), {N, r});
    Tensor dh;
    if (dropped) dh = temporary(c.device(), {N, in_});
    // Without dropout dh goes straight into din; with it, through the mask.
    ops.lora_backward(dropped ? f32(dh) : f32(din), dA, dB, f32(du), f32(dout), f32(h),
                      f32(s.lora_u), value_of(lora_->A), value_of(lora_->B), N, in_, out_, r,
                      static_cast<float>(c.lora.scaling()), !dropped);
    if (dropped)
      ops.lora_dropout(
          c.at_first_row(lora_dropout_key(c.lora_seed, c.forward_count, lora_->layer, lora_->slot),
                         N * in_),
          c.lora.dropout, f32(dh), f32(din), N * in_, true);
  }
  s = {};
}

std::vector<float> Linear::merged_weight() const {
  SNUG_CHECK(lora_, name_, ": merged_weight needs a LoRA adapter");
  Device& dev = ctx_->device();
  const OpTable& ops = ctx_->ops();
  const int64_t r = lora_->A->value.dim(0);
  std::vector<float> w(static_cast<size_t>(in_ * out_));
  Tensor scratch;
  const float* base = ctx_->gemm_weight(w_, scratch);
  // The merge runs where the weights are: in w itself where the host addresses the device's
  // memory (cpu), else in a device temporary downloaded into w.
  Tensor merged;
  float* m = w.data();
  if (dev.host_addressable()) {
    dev.download(m, base, in_ * out_);
  } else {
    merged = temporary(dev, {in_ * out_});
    m = f32(merged);
    dev.copy(m, base, in_ * out_);
  }
  const float s = static_cast<float>(ctx_->lora.scaling());
  if (layout_ == LinearLayout::conv1d)  // w(in,out) += s A(r,in)^T B(out,r)^T
    ops.gemm_f32(true, true, in_, out_, r, s, value_of(lora_->A), in_, value_of(lora_->B), r, 1.0f,
                 m, out_);
  else  // w(out,in) += s B(out,r) A(r,in)
    ops.gemm_f32(false, false, out_, in_, r, s, value_of(lora_->B), r, value_of(lora_->A), in_,
                 1.0f, m, in_);
  if (merged.defined()) dev.download(w.data(), m, in_ * out_);
  return w;
}

}  // namespace snug::nn

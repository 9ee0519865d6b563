#include "nn/lm_head_loss.h"

#include "core/error.h"
#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

LMHeadLoss::LMHeadLoss(ParameterStore& ps, const std::string& name, int64_t hidden, int64_t vocab,
                       Parameter* tied, Parameter* bias)
    : ctx_(&ps.context()), hidden_(hidden), vocab_(vocab), b_(bias) {
  if (bias)
    SNUG_CHECK(bias->shape() == Shape({vocab}), name, ": bias ", bias->name, " has shape ",
               shape_str(bias->shape()), ", not (", vocab, ")");
  if (tied) {
    SNUG_CHECK(tied->shape() == Shape({vocab, hidden}), name, ": tied weight ", tied->name,
               " has shape ", shape_str(tied->shape()), ", not (", vocab, ",", hidden, ")");
    w_ = tied;
  } else {
    w_ = ps.add(name + ".weight", {vocab, hidden}, true);
  }
}

double LMHeadLoss::chunked(const Tensor& x, const Saved& s, float* dx, float* dw) const {
  RunContext& c = *ctx_;
  const int64_t N = x.numel() / hidden_, V = vocab_;
  const int64_t chunk = kernels::lm_head_default_chunk(N, V, c.lm_head_budget_floats);
  const Tensor scratch = temporary(c.device(), {kernels::lm_head_scratch_floats(N, V, chunk)});
  Tensor w_scratch, x16;
  const bool head16 = c.bf16_gemm(w_);
  const float* w = head16 ? nullptr : c.gemm_weight(w_, w_scratch);
  const uint16_t* w16 = head16 ? c.gemm_weight16(w_, w_scratch) : nullptr;
  if (head16) x16 = c.to_bf16(x);
  const float scale = s.valid > 0 ? s.loss_scale / static_cast<float>(s.valid) : 0.0f;
  const int32_t* tg = s.targets.data<int32_t>();
  return head16 ? c.ops().lm_head_xent_bf16(nullptr, dx, dw, x16.data_u16(), w16, tg, N, hidden_, V,
                                            scale, f32(scratch), chunk)
                : c.ops().lm_head_xent(nullptr, dx, dw, f32(x), w, tg, N, hidden_, V, scale,
                                       f32(scratch), chunk);
}

double LMHeadLoss::forward(const Tensor& x, const Tensor& targets, int64_t valid, LogitsMode mode,
                           bool for_backward, float loss_scale, bool defer_weight_grad,
                           Saved& s) const {
  RunContext& c = *ctx_;
  const OpTable& ops = c.ops();
  const int64_t B = x.dim(0), T = x.dim(1), N = B * T, V = vocab_, C = hidden_;
  s = {};
  s.targets = targets;
  s.valid = valid;
  s.loss_scale = loss_scale;
  double sum = 0.0;
  SNUG_CHECK(!(b_ && targets.defined() && mode == LogitsMode::chunked), "LM head with a bias (",
             b_ ? b_->name : "",
             "): chunked logits are not supported, "
             "use full logits");
  if (targets.defined() && mode == LogitsMode::chunked) {
    const bool defer = for_backward && defer_weight_grad && w_->requires_grad;
    float* dw = nullptr;
    if (for_backward) {
      s.dx = temporary(c.device(), {B, T, C});
      if (!defer) dw = c.grad(w_);
    }
    sum = chunked(x, s, f32(s.dx), dw);
    c.flush_grads();     // --bf16-full: W's head gradient into its bf16 gradient
    c.round_half(s.dx);  // the head GEMM's input gradient, 16-bit
    if (defer) s.x = x;  // the deferred W gradient reads it at the end of backward
    s.deferred = defer;
  } else {
    s.x = x;
    s.probs = activation(c.device(), {B, T, V});
    {
      // logits(N,V) = x(N,C) @ W(V,C)^T
      Tensor w_scratch;
      if (c.bf16_gemm(w_)) {
        const uint16_t* w = c.gemm_weight16(w_, w_scratch);
        const Tensor x16 = c.to_bf16(x);
        ops.gemm_bf16(false, true, N, V, C, 1.0f, x16.data_u16(), C, w, C, 0.0f, f32(s.probs), V);
      } else {
        const float* w = c.gemm_weight(w_, w_scratch);
        ops.gemm_f32(false, true, N, V, C, 1.0f, f32(x), C, w, C, 0.0f, f32(s.probs), V);
      }
      if (b_) ops.add_bias_rows(f32(s.probs), c.vector_f32(b_).get(), N, V);
      c.round_half(s.probs);
    }
    if (targets.defined()) {
      s.losses = activation(c.device(), {B, T});
      sum = ops.softmax_xent_forward(f32(s.losses), f32(s.probs), f32(s.probs),
                                     targets.data<int32_t>(), N, V);
    }
  }
  return valid > 0 ? sum / static_cast<double>(valid) : 0.0;
}

Tensor LMHeadLoss::backward(Saved& s) const {
  if (s.dx.defined()) return std::move(s.dx);
  SNUG_CHECK(s.probs.defined() && s.losses.defined(),
             "LM head backward: needs a forward with targets and for_backward");
  RunContext& c = *ctx_;
  const OpTable& ops = c.ops();
  const int64_t B = s.x.dim(0), T = s.x.dim(1), N = B * T, V = vocab_, C = hidden_;
  // dlogits, in place of the probabilities.
  const float scale = s.valid > 0 ? s.loss_scale / static_cast<float>(s.valid) : 0.0f;
  ops.softmax_xent_backward(f32(s.probs), f32(s.probs), s.targets.data<int32_t>(), scale, N, V);
  s.losses.reset();
  if (b_) {
    if (float* db = c.grad(b_)) ops.bias_grad_rows(db, f32(s.probs), N, V);
  }
  Tensor dx = temporary(c.device(), {B, T, C});
  float* dw = c.grad(w_);
  const bool trains = w_->requires_grad;
  Tensor w_scratch;
  // dx(N,C) = dlogits(N,V) @ W(V,C);  dW(V,C) += dlogits^T @ x
  if (c.bf16_gemm(w_)) {
    const uint16_t* w = c.gemm_weight16(w_, w_scratch);
    const Tensor dlogits16 = c.to_bf16(s.probs), x16 = c.to_bf16(s.x);
    ops.gemm_bf16(false, false, N, C, V, 1.0f, dlogits16.data_u16(), V, w, C, 0.0f, f32(dx), C);
    if (trains)
      ops.gemm_bf16(true, false, V, C, N, 1.0f, dlogits16.data_u16(), V, x16.data_u16(), C, 1.0f,
                    dw, C);
  } else {
    const float* w = c.gemm_weight(w_, w_scratch);
    ops.gemm_f32(false, false, N, C, V, 1.0f, f32(s.probs), V, w, C, 0.0f, f32(dx), C);
    if (trains) ops.gemm_f32(true, false, V, C, N, 1.0f, f32(s.probs), V, f32(s.x), C, 1.0f, dw, C);
  }
  s.probs.reset();
  c.round_half(dx);
  return dx;
}

void LMHeadLoss::weight_backward(Saved& s) const {
  RunContext& c = *ctx_;
  chunked(s.x, s, nullptr, c.grad(w_));
  s = {};
  c.flush_grads();
}

}  // namespace snug::nn

#include "nn/attention.h"

#include "core/error.h"
#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

Attention::Attention(ParameterStore& ps, const std::string& prefix, const AttentionConfig& cfg)
    : ctx_(&ps.context()), cfg_(cfg), fused_(!cfg.fused_qkv_name.empty()) {
  if (cfg_.num_kv_heads == 0) cfg_.num_kv_heads = cfg_.num_heads;
  SNUG_CHECK(cfg_.hidden > 0 && cfg_.num_heads > 0 && cfg_.num_kv_heads > 0, prefix,
             ": hidden size ", cfg_.hidden, ", ", cfg_.num_heads, " heads and ", cfg_.num_kv_heads,
             " key/value heads must be positive");
  SNUG_CHECK(cfg_.num_heads % cfg_.num_kv_heads == 0, prefix, ": ", cfg_.num_heads,
             " attention heads are not a multiple of ", cfg_.num_kv_heads, " key/value heads");
  if (cfg_.head_dim == 0) {
    SNUG_CHECK(cfg_.hidden % cfg_.num_heads == 0, prefix, ": hidden size ", cfg_.hidden,
               " is not a multiple of ", cfg_.num_heads, " heads");
    cfg_.head_dim = cfg_.hidden / cfg_.num_heads;
  }
  hs_ = cfg_.head_dim;
  SNUG_CHECK(cfg_.rotary_dim >= 0 && cfg_.rotary_dim % 2 == 0 && cfg_.rotary_dim <= hs_, prefix,
             ": rotary dims ", cfg_.rotary_dim, " must be even and at most the head size ", hs_);
  q_width_ = cfg_.num_heads * hs_;
  kv_width_ = cfg_.num_kv_heads * hs_;
  const std::string p = prefix + ".";
  if (fused_) {
    q_.emplace(ps, p + cfg_.fused_qkv_name, cfg_.hidden, q_width_ + 2 * kv_width_, cfg_.qkv_bias,
               cfg_.layout);
  } else {
    q_.emplace(ps, p + cfg_.q_name, cfg_.hidden, q_width_, cfg_.qkv_bias, cfg_.layout);
    k_.emplace(ps, p + cfg_.k_name, cfg_.hidden, kv_width_, cfg_.qkv_bias, cfg_.layout);
    v_.emplace(ps, p + cfg_.v_name, cfg_.hidden, kv_width_, cfg_.qkv_bias, cfg_.layout);
  }
  o_.emplace(ps, p + cfg_.o_name, q_width_, cfg_.hidden, cfg_.o_bias, cfg_.layout);
}

AttentionDims Attention::dims(int64_t B, int64_t T) const {
  AttentionDims d;
  d.B = B;
  d.T = T;
  d.NH = cfg_.num_heads;
  d.NKV = cfg_.num_kv_heads;
  d.hs = hs_;
  // Fused: q, k, v are column slices of one (B,T,Q+2KV) tensor; else each its own tensor.
  d.ldq = fused_ ? q_width_ + 2 * kv_width_ : q_width_;
  d.ldk = d.ldv = fused_ ? d.ldq : kv_width_;
  d.ldo = q_width_;
  d.causal = cfg_.causal;
  return d;
}

void Attention::forward(const Tensor& x, const Tensor& out, Saved& s) const {
  const RunContext& c = *ctx_;
  const OpTable& ops = c.ops();
  const int64_t B = x.dim(0), T = x.dim(1);
  const AttentionDims d = dims(B, T);
  float *q = nullptr, *k = nullptr, *v = nullptr;
  if (fused_) {
    s.q = c.work({B, T, d.ldq});
  } else {
    s.q = c.work({B, T, q_width_});
    s.k = c.work({B, T, kv_width_});
    s.v = c.work({B, T, kv_width_});
  }
  const bool flash = cfg_.kernel == AttentionImpl::flash;
  if (flash)
    s.lse = activation(c.device(), {B, d.NH, T});
  else
    s.att = c.work({B, d.NH, T, T});
  const Tensor y = c.work({B, T, q_width_});
  if (fused_) {
    q_->forward(x, s.q, s.q_lin);
    q = f32(s.q);
    k = offset(q, q_width_);
    v = offset(q, q_width_ + kv_width_);
  } else {
    q_->forward(x, s.q, s.q_lin);
    k_->forward(x, s.k, s.k_lin);
    v_->forward(x, s.v, s.v_lin);
    q = f32(s.q);
    k = f32(s.k);
    v = f32(s.v);
  }
  if (cfg_.rotary_dim > 0) {
    ops.rope_forward(q, B, T, d.NH, hs_, d.ldq, cfg_.rotary_dim, cfg_.rope_theta);
    ops.rope_forward(k, B, T, d.NKV, hs_, d.ldk, cfg_.rotary_dim, cfg_.rope_theta);
    c.round_half(s.q);  // 16-bit rotated queries and keys, as a 16-bit rotary would leave them
    c.round_half(s.k);
  }
  if (flash)
    ops.flash_attention_forward_gqa(f32(y), f32(s.lse), q, k, v, d);
  else
    ops.attention_forward_gqa(f32(y), f32(s.att), q, k, v, d);
  c.round_half(y);
  c.round_half(s.att);
  o_->forward(y, out, s.o_lin);
}

Tensor Attention::backward(const Tensor& dout, Saved& s) const {
  const RunContext& c = *ctx_;
  const OpTable& ops = c.ops();
  const int64_t B = dout.dim(0), T = dout.dim(1);
  const AttentionDims d = dims(B, T);
  Tensor y = s.o_lin.in;  // o's backward releases its Saved; flash's backward reads y after
  Tensor dy = temporary(c.device(), {B, T, q_width_});
  {
    const Tensor dout16 = c.half_grad(dout, o_->weight(), o_->lora() != nullptr);
    o_->backward(dout16, s.o_lin, dy, false);
  }
  c.round_half(dy);
  const float* q = f32(s.q);
  const float* k = fused_ ? offset(f32(s.q), q_width_) : f32(s.k);
  const float* v = fused_ ? offset(f32(s.q), q_width_ + kv_width_) : f32(s.v);
  Tensor dq, dk, dv;  // fused: dq holds [dq|dk|dv]
  float *dqp = nullptr, *dkp = nullptr, *dvp = nullptr;
  if (fused_) {
    dq = temporary(c.device(), {B, T, d.ldq});
    dqp = f32(dq);
    dkp = offset(dqp, q_width_);
    dvp = offset(dqp, q_width_ + kv_width_);
  } else {
    dq = temporary(c.device(), {B, T, q_width_});
    dk = temporary(c.device(), {B, T, kv_width_});
    dv = temporary(c.device(), {B, T, kv_width_});
    dqp = f32(dq);
    dkp = f32(dk);
    dvp = f32(dv);
  }
  if (cfg_.kernel == AttentionImpl::flash)
    ops.flash_attention_backward_gqa(dqp, dkp, dvp, f32(dy), q, k, v, f32(y), f32(s.lse), d);
  else
    ops.attention_backward_gqa(dqp, dkp, dvp, f32(dy), q, k, v, f32(s.att), d);
  y.reset();
  s.att.reset();
  s.lse.reset();
  dy.reset();
  s.q.reset();
  s.k.reset();
  s.v.reset();
  if (cfg_.rotary_dim > 0) {
    ops.rope_backward(dqp, B, T, d.NH, hs_, d.ldq, cfg_.rotary_dim, cfg_.rope_theta);
    ops.rope_backward(dkp, B, T, d.NKV, hs_, d.ldk, cfg_.rotary_dim, cfg_.rope_theta);
  }
  c.round_half(dq);
  c.round_half(dk);
  c.round_half(dv);
  Tensor dx = temporary(c.device(), {B, T, cfg_.hidden});
  q_->backward(dq, s.q_lin, dx, false);
  if (!fused_) {
    k_->backward(dk, s.k_lin, dx, true);
    v_->backward(dv, s.v_lin, dx, true);
  }
  c.round_half(dx);
  return dx;
}

void Attention::compact(Saved& s) const {
  ctx_->compact({&s.q_lin.in});                       // the norm's output
  if (!fused_) s.k_lin.in = s.v_lin.in = s.q_lin.in;  // one input, three projections
  ctx_->compact({&s.q, &s.k, &s.v, &s.att, &s.o_lin.in});
}

void Attention::widen(Saved& s) const {
  ctx_->widen({&s.q_lin.in}, /*gemm_inputs=*/true);  // the norm's output
  if (!fused_) s.k_lin.in = s.v_lin.in = s.q_lin.in;
  ctx_->widen({&s.q, &s.k, &s.v, &s.att, &s.o_lin.in}, false);
}

void Attention::set_input(Saved& s, const Tensor& x) const {
  s.q_lin.in = x;
  if (!fused_) s.k_lin.in = s.v_lin.in = x;
}

void Attention::recompute(Saved& s) const {
  if (cfg_.kernel == AttentionImpl::flash) return;  // flash keeps only lse, used as it is
  // Naive attention's probabilities: the same call rewrites y with identical values.
  const RunContext& c = *ctx_;
  const int64_t B = s.o_lin.in.dim(0), T = s.o_lin.in.dim(1);
  const AttentionDims d = dims(B, T);
  s.att = c.work({B, d.NH, T, T});
  const float* q = f32(s.q);
  const float* k = fused_ ? offset(f32(s.q), q_width_) : f32(s.k);
  const float* v = fused_ ? offset(f32(s.q), q_width_ + kv_width_) : f32(s.v);
  c.ops().attention_forward_gqa(f32(s.o_lin.in), f32(s.att), q, k, v, d);
  c.round_half(s.att);
  c.round_half(s.o_lin.in);
}

std::vector<Linear*> Attention::linears() {
  std::vector<Linear*> out{&*q_};
  if (!fused_) out.insert(out.end(), {&*k_, &*v_});
  out.push_back(&*o_);
  return out;
}

}  // namespace snug::nn

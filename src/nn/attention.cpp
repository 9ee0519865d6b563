#include "nn/attention.h"

#include <vector>

#include "core/error.h"
#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

Attention::Attention(ParameterStore& ps, const std::string& prefix, const AttentionConfig& cfg)
    : ctx_(&ps.context()), prefix_(prefix), cfg_(cfg), fused_(!cfg.fused_qkv_name.empty()) {
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
  SNUG_CHECK(cfg_.sliding_window >= 0 && (cfg_.sliding_window == 0 || cfg_.causal), prefix,
             ": sliding window ", cfg_.sliding_window, " must be >= 0 and needs causal attention");
  SNUG_CHECK(cfg_.rope_inv_freq.empty() ||
                 static_cast<int64_t>(cfg_.rope_inv_freq.size()) * 2 == cfg_.rotary_dim,
             prefix, ": ", cfg_.rope_inv_freq.size(), " rope inverse frequencies for ",
             cfg_.rotary_dim, " rotary dims (need half as many)");
  if (cfg_.fused_qkv_layout == FusedQKVLayout::per_head_interleaved) {
    SNUG_CHECK(fused_, prefix, ": the per-head interleaved q/k/v layout needs a fused projection");
    SNUG_CHECK(cfg_.num_kv_heads == cfg_.num_heads, prefix,
               ": the per-head interleaved q/k/v layout needs as many key/value heads (",
               cfg_.num_kv_heads, ") as attention heads (", cfg_.num_heads, ")");
  }
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

AttentionDims Attention::dims(int64_t B, int64_t T, const Tensor& pos) const {
  AttentionDims d;
  d.B = B;
  d.T = T;
  d.NH = cfg_.num_heads;
  d.NKV = cfg_.num_kv_heads;
  d.hs = hs_;
  // One [q|k|v] tensor: q, k, v are column slices of one (B,T,Q+2KV) tensor; else each its own
  // tensor.
  d.ldq = one_qkv_tensor() ? q_width_ + 2 * kv_width_ : q_width_;
  d.ldk = d.ldv = one_qkv_tensor() ? d.ldq : kv_width_;
  d.ldo = q_width_;
  d.causal = cfg_.causal;
  d.pos = pos.defined() ? pos.data<int32_t>() : nullptr;
  d.window = cfg_.sliding_window;
  d.bf16_operands = ctx_->compute == ComputeDType::bf16;
  return d;
}

AttentionDims Attention::dims(int64_t B, int64_t T, const Saved& s) const {
  AttentionDims d = dims(B, T, s.pos);
  if (s.dropout) {
    d.dropout_p = cfg_.probs_dropout;
    d.dropout_key = s.dropout_key;
    d.drop_mask = s.drop_mask.defined() ? s.drop_mask.data<uint8_t>() : nullptr;
    d.att_dropped = f32(s.att_dropped);
  }
  return d;
}

void Attention::alloc_dropout(int64_t B, int64_t T, Saved& s) const {
  if (!s.dropout || cfg_.kernel == AttentionImpl::flash) return;
  const RunContext& c = *ctx_;
  s.drop_mask =
      Tensor::empty({B, cfg_.num_heads, T, T}, DType::u8, Category::activations, c.device());
  s.att_dropped = c.work({B, cfg_.num_heads, T, T});
}

void Attention::forward(const Tensor& x, const Tensor& out, Saved& s) const {
  const RunContext& c = *ctx_;
  const OpTable& ops = c.ops();
  const int64_t B = x.dim(0), T = x.dim(1);
  s.pos = c.position_ids;
  if (s.pos.defined()) {
    SNUG_CHECK(s.pos.shape() == Shape({B, T}) && s.pos.dtype() == DType::i32, prefix_,
               ": position ids must be int32 of the input's shape (", B, ", ", T, ")");
    SNUG_CHECK(cfg_.causal, prefix_, ": position ids (per-document masks) need causal attention");
  }
  s.dropout = c.training && cfg_.probs_dropout > 0;
  const AttentionDims d0 = dims(B, T, s.pos);
  // The probabilities (B, NH, T, T) in dropout_index's order.
  s.dropout_key = s.dropout
                      ? c.at_first_row(c.dropout_key(cfg_.dropout_layer, kAttentionDropoutSite),
                                       B * d0.NH * T * T)
                      : 0;
  if (one_qkv_tensor()) {
    s.q = c.work({B, T, d0.ldq});
  } else {
    s.q = c.work({B, T, q_width_});
    s.k = c.work({B, T, kv_width_});
    s.v = c.work({B, T, kv_width_});
  }
  const bool flash = cfg_.kernel == AttentionImpl::flash;
  if (flash)
    s.lse = activation(c.device(), {B, d0.NH, T});
  else
    s.att = c.work({B, d0.NH, T, T});
  alloc_dropout(B, T, s);
  const AttentionDims d = dims(B, T, s);
  const Tensor y = c.work({B, T, q_width_});
  project(x, s, d);
  const auto [q, k, v] = qkv_of(s.q, s.k, s.v);
  if (cfg_.rotary_dim > 0) {
    c.round_half(s.q);  // 16-bit rotated queries and keys, as a 16-bit rotary would leave them
    c.round_half(s.k);
  }
  if (flash)
    ops.flash_attention_forward_gqa(f32(y), f32(s.lse), q, k, v, d);
  else
    ops.attention_forward_gqa(f32(y), f32(s.att), q, k, v, d);
  c.round_half(y);
  c.round_half(s.att);
  c.round_half(s.att_dropped);
  o_->forward(y, out, s.o_lin);
}

void Attention::project(const Tensor& x, Saved& s, const AttentionDims& d) const {
  const RunContext& c = *ctx_;
  const OpTable& ops = c.ops();
  const int64_t B = x.dim(0), T = x.dim(1);
  if (one_qkv_tensor()) {
    q_->forward(x, s.q, s.q_lin);
  } else if (fused_) {  // per-head interleaved: the projection's output is only split
    const Tensor qkv = temporary(c.device(), {B, T, q_width_ + 2 * kv_width_});
    q_->forward(x, qkv, s.q_lin);
    ops.qkv_interleaved_split(f32(s.q), f32(s.k), f32(s.v), f32(qkv), B * T, d.NH, hs_);
  } else {
    q_->forward(x, s.q, s.q_lin);
    k_->forward(x, s.k, s.k_lin);
    v_->forward(x, s.v, s.v_lin);
  }
  if (cfg_.rotary_dim > 0) {
    const auto [q, k, v] = qkv_of(s.q, s.k, s.v);
    ops.rope_forward(q, B, T, d.NH, hs_, d.ldq, cfg_.rotary_dim, cfg_.rope_theta, d.pos,
                     inv_freq());
    ops.rope_forward(k, B, T, d.NKV, hs_, d.ldk, cfg_.rotary_dim, cfg_.rope_theta, d.pos,
                     inv_freq());
  }
}

void Attention::forward_cached(const Tensor& x, const Tensor& out, const KVSlot& slot) const {
  const RunContext& c = *ctx_;
  const OpTable& ops = c.ops();
  const int64_t B = x.dim(0), T = x.dim(1), Tmax = slot.k.dim(1);
  SNUG_CHECK(cfg_.causal, prefix_, ": a KV cache needs causal attention");
  SNUG_CHECK(slot.k.dim(0) == B && slot.k.dim(2) == kv_width_ && slot.past + T <= Tmax, prefix_,
             ": ", T, " new rows after ", slot.past, " do not fit a KV cache of ", slot.k.dim(0),
             " x ", Tmax, " x ", slot.k.dim(2));
  // Row (b, t) is position past + t.
  std::vector<int32_t> host(static_cast<size_t>(B * T));
  for (int64_t i = 0; i < B * T; ++i) host[i] = static_cast<int32_t>(slot.past + i % T);
  const Tensor pos = Tensor::empty({B, T}, DType::i32, Category::temporary, c.device());
  c.device().upload(pos.data<int32_t>(), host.data(), B * T);
  // The rotary op reads absolute positions from pos (not document starts: no mask is built).
  AttentionDims d = dims(B, T, Tensor());
  d.pos = pos.data<int32_t>();
  Saved s;  // the projections' Saveds, dropped on return
  if (one_qkv_tensor()) {
    s.q = temporary(c.device(), {B, T, d.ldq});
  } else {
    s.q = temporary(c.device(), {B, T, q_width_});
    s.k = temporary(c.device(), {B, T, kv_width_});
    s.v = temporary(c.device(), {B, T, kv_width_});
  }
  project(x, s, d);
  const auto [q, k, v] = qkv_of(s.q, s.k, s.v);
  if (cfg_.rotary_dim > 0) {
    c.round_half(s.q);  // 16-bit rotated queries and keys, as forward() leaves them
    c.round_half(s.k);
  }
  const Tensor y = temporary(c.device(), {B, T, q_width_});
  if (slot.k.dtype() == DType::f32) {
    ops.kv_cache_write(f32(slot.k), k, B, T, Tmax, slot.past, kv_width_, d.ldk);
    ops.kv_cache_write(f32(slot.v), v, B, T, Tmax, slot.past, kv_width_, d.ldv);
    ops.attention_decode_gqa(f32(y), q, f32(slot.k), f32(slot.v), B, T, slot.past, Tmax, d.NH,
                             d.NKV, hs_, d.ldq, cfg_.sliding_window);
  } else {
    // A 16-bit cache (the model computes in 16 bits): the keys and values written are already
    // rounded to its dtype, so storing them loses nothing.
    const bool f16 = slot.k.dtype() == DType::f16;
    ops.kv_cache_write_half(slot.k.data_u16(), k, B, T, Tmax, slot.past, kv_width_, d.ldk, f16);
    ops.kv_cache_write_half(slot.v.data_u16(), v, B, T, Tmax, slot.past, kv_width_, d.ldv, f16);
    ops.attention_decode_gqa_half(f32(y), q, slot.k.data_u16(), slot.v.data_u16(), B, T, slot.past,
                                  Tmax, d.NH, d.NKV, hs_, d.ldq, cfg_.sliding_window, f16);
  }
  c.round_half(y);
  s.q.reset();
  s.k.reset();
  s.v.reset();
  o_->forward(y, out, s.o_lin);
}

Tensor Attention::backward(const Tensor& dout, Saved& s) const {
  const RunContext& c = *ctx_;
  const OpTable& ops = c.ops();
  const int64_t B = dout.dim(0), T = dout.dim(1);
  const AttentionDims d = dims(B, T, s);
  Tensor y = s.o_lin.in;  // o's backward releases its Saved; flash's backward reads y after
  Tensor dy = temporary(c.device(), {B, T, q_width_});
  {
    const Tensor dout16 =
        c.half_grad(dout, o_->weight(), o_->lora() != nullptr || !o_->bf16_path());
    o_->backward(dout16, s.o_lin, dy, false);
  }
  c.round_half(dy);
  const auto [q, k, v] = qkv_of(s.q, s.k, s.v);
  Tensor dq, dk, dv;  // one [q|k|v] tensor: dq holds [dq|dk|dv]
  if (one_qkv_tensor()) {
    dq = temporary(c.device(), {B, T, d.ldq});
  } else {
    dq = temporary(c.device(), {B, T, q_width_});
    dk = temporary(c.device(), {B, T, kv_width_});
    dv = temporary(c.device(), {B, T, kv_width_});
  }
  const auto [dqp, dkp, dvp] = qkv_of(dq, dk, dv);
  if (cfg_.kernel == AttentionImpl::flash)
    ops.flash_attention_backward_gqa(dqp, dkp, dvp, f32(dy), q, k, v, f32(y), f32(s.lse), d);
  else
    ops.attention_backward_gqa(dqp, dkp, dvp, f32(dy), q, k, v, f32(s.att), d);
  y.reset();
  s.att.reset();
  s.drop_mask.reset();
  s.att_dropped.reset();
  s.lse.reset();
  dy.reset();
  s.q.reset();
  s.k.reset();
  s.v.reset();
  if (cfg_.rotary_dim > 0) {
    ops.rope_backward(dqp, B, T, d.NH, hs_, d.ldq, cfg_.rotary_dim, cfg_.rope_theta, d.pos,
                      inv_freq());
    ops.rope_backward(dkp, B, T, d.NKV, hs_, d.ldk, cfg_.rotary_dim, cfg_.rope_theta, d.pos,
                      inv_freq());
  }
  c.round_half(dq);
  c.round_half(dk);
  c.round_half(dv);
  if (fused_ &&
      !one_qkv_tensor()) {  // per-head interleaved: the projection's gradient, interleaved
    const Tensor dqkv = temporary(c.device(), {B, T, q_width_ + 2 * kv_width_});
    ops.qkv_interleaved_merge(f32(dqkv), dqp, dkp, dvp, B * T, d.NH, hs_);
    dq = dqkv;
    dk.reset();
    dv.reset();
  }
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
  ctx_->compact({&s.q, &s.k, &s.v, &s.att, &s.att_dropped, &s.o_lin.in});
}

void Attention::widen(Saved& s) const {
  ctx_->widen({&s.q_lin.in}, /*gemm_inputs=*/true);  // the norm's output
  if (!fused_) s.k_lin.in = s.v_lin.in = s.q_lin.in;
  ctx_->widen({&s.q, &s.k, &s.v, &s.att, &s.att_dropped, &s.o_lin.in}, false);
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
  s.att = c.work({B, cfg_.num_heads, T, T});
  alloc_dropout(B, T, s);  // the same key: the same mask and dropped probabilities
  const AttentionDims d = dims(B, T, s);
  const auto [q, k, v] = qkv_of(s.q, s.k, s.v);
  c.ops().attention_forward_gqa(f32(s.o_lin.in), f32(s.att), q, k, v, d);
  c.round_half(s.att);
  c.round_half(s.att_dropped);
  c.round_half(s.o_lin.in);
}

Attention::QKV Attention::qkv_of(const Tensor& q, const Tensor& k, const Tensor& v) const {
  float* base = f32(q);
  if (one_qkv_tensor()) return {base, offset(base, q_width_), offset(base, q_width_ + kv_width_)};
  return {base, f32(k), f32(v)};
}

std::vector<Linear*> Attention::linears() {
  std::vector<Linear*> out{&*q_};
  if (!fused_) out.insert(out.end(), {&*k_, &*v_});
  out.push_back(&*o_);
  return out;
}

}  // namespace snug::nn

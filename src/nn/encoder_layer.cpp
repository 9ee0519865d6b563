#include "nn/encoder_layer.h"

#include "core/error.h"
#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

EncoderLayer::EncoderLayer(ParameterStore& ps, const std::string& prefix,
                           const EncoderLayerConfig& cfg)
    : ctx_(&ps.context()), cfg_(cfg) {
  SNUG_CHECK(cfg.hidden_dropout >= 0 && cfg.hidden_dropout < 1, prefix, ": hidden dropout ",
             cfg.hidden_dropout, " must be in [0, 1)");
  const std::string p = prefix + ".";
  const int64_t C = cfg.attn.hidden;
  cfg_.attn.dropout_layer = cfg.index;
  attn_.emplace(ps, p + cfg.attn_name, cfg_.attn);
  norm1_.emplace(ps, p + cfg.norm1_name, C, NormKind::layer, cfg.norm_eps);
  mlp_.emplace(ps, prefix, cfg.mlp);
  norm2_.emplace(ps, p + cfg.norm2_name, C, NormKind::layer, cfg.norm_eps);
}

bool EncoderLayer::drops() const {
  return ctx_->training && cfg_.hidden_dropout > 0;
}

void EncoderLayer::dropout(const Tensor& x, Tensor& mask, int site) const {
  if (!drops()) return;
  const RunContext& c = *ctx_;
  mask = Tensor::empty(x.shape(), DType::u8, Category::activations, c.device());
  c.ops().dropout_forward(f32(x), mask.data<uint8_t>(), f32(x), x.numel(), cfg_.hidden_dropout,
                          c.at_first_row(c.dropout_key(cfg_.index, site), x.numel()));
}

Tensor EncoderLayer::forward(const Tensor& x, Saved& s) const {
  const RunContext& c = *ctx_;
  const OpTable& ops = c.ops();
  const Shape shape = x.shape();
  const int64_t n = x.numel();
  // h1 = x + dropout(attn(x)); the attention reads x as its projections' input.
  const Tensor h1 = activation(c.device(), shape);
  attn_->forward(x, h1, s.attn);
  dropout(h1, s.mask1, kAttentionOutputDropoutSite);
  ops.add(f32(h1), f32(h1), f32(x), n);
  const Tensor n1 = c.work(shape);
  norm1_->forward(h1, n1, s.n1);
  c.round_gemm_input(n1);
  // out = norm2(n1 + dropout(mlp(n1))).
  const Tensor h2 = activation(c.device(), shape);
  mlp_->forward(n1, h2, s.mlp);
  dropout(h2, s.mask2, kMLPOutputDropoutSite);
  ops.add(f32(h2), f32(h2), f32(n1), n);
  Tensor out = activation(c.device(), shape);
  norm2_->forward(h2, out, s.n2);
  return out;
}

void EncoderLayer::backward(const Tensor& dres, Saved& s) const {
  const RunContext& c = *ctx_;
  const OpTable& ops = c.ops();
  const int64_t n = dres.numel();
  // dh2 = norm2'(dout): also d/dn1 through the residual.
  Tensor dh = temporary(c.device(), dres.shape());
  dh.zero_();
  norm2_->backward(dres, s.n2, dh);
  {
    if (s.mask2.defined()) {
      // d(mlp out) = dropout'(dh2), into dres (free until the end: d/d(out) was consumed).
      ops.dropout_backward(f32(dres), f32(dh), s.mask2.data<uint8_t>(), n, cfg_.hidden_dropout);
      s.mask2.reset();
    } else {
      c.device().copy(f32(dres), f32(dh), n);
    }
    const Tensor dn1 = mlp_->backward(dres, s.mlp);
    ops.add(f32(dh), f32(dh), f32(dn1), n);  // d/dn1 = dh2 + mlp'(...)
  }
  // dh1 = norm1'(dn1), into dres: d/dx through the residual; then + attn'(dropout'(dh1)).
  Tensor(dres).zero_();  // a handle on the same storage
  norm1_->backward(dh, s.n1, dres);
  if (s.mask1.defined()) {
    ops.dropout_backward(f32(dh), f32(dres), s.mask1.data<uint8_t>(), n, cfg_.hidden_dropout);
    s.mask1.reset();
  } else {
    c.device().copy(f32(dh), f32(dres), n);
  }
  const Tensor dx = attn_->backward(dh, s.attn);
  dh.reset();
  ops.add(f32(dres), f32(dres), f32(dx), n);
}

void EncoderLayer::compact(Saved& s) const {
  attn_->compact(s.attn);
  mlp_->compact(s.mlp);
}

void EncoderLayer::widen(Saved& s) const {
  attn_->widen(s.attn);
  mlp_->widen(s.mlp);
}

void EncoderLayer::drop_selective(Saved& s) const {
  attn_->drop_selective(s.attn);
  mlp_->drop_input(s.mlp);
  mlp_->drop_selective(s.mlp);
}

void EncoderLayer::recompute_selective(Saved& s) const {
  const RunContext& c = *ctx_;
  const Tensor n1 = c.work(s.n1.in.shape());
  norm1_->recompute(s.n1, n1);
  c.round_gemm_input(n1);
  mlp_->set_input(s.mlp, n1);
  attn_->recompute(s.attn);
  mlp_->recompute(s.mlp);
}

std::vector<Linear*> EncoderLayer::linears() {
  std::vector<Linear*> out = attn_->linears();
  for (Linear* l : mlp_->linears()) out.push_back(l);
  return out;
}

}  // namespace snug::nn

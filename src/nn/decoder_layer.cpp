#include "nn/decoder_layer.h"

#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

DecoderLayer::DecoderLayer(ParameterStore& ps, const std::string& prefix,
                           const DecoderLayerConfig& cfg)
    : ctx_(&ps.context()), cfg_(cfg) {
  const std::string p = prefix + ".";
  const int64_t C = cfg.attn.hidden;
  auto norm1 = [&] { norm1_.emplace(ps, p + cfg.norm1_name, C, cfg.norm, cfg.norm_eps); };
  auto norm2 = [&] { norm2_.emplace(ps, p + cfg.norm2_name, C, cfg.norm, cfg.norm_eps); };
  auto attn = [&] { attn_.emplace(ps, p + cfg.attn_name, cfg.attn); };
  auto mlp = [&] { mlp_.emplace(ps, p + cfg.mlp_name, cfg.mlp); };
  switch (cfg.order) {
    case LayerParamOrder::interleaved:
      norm1(), attn(), norm2(), mlp();
      break;
    case LayerParamOrder::norms_first:
      norm1(), norm2(), attn(), mlp();
      break;
    case LayerParamOrder::blocks_first:
      attn(), mlp(), norm1(), norm2();
      break;
  }
}

Tensor DecoderLayer::forward(const Tensor& x, Saved& s, const KVSlot* kv) const {
  const RunContext& c = *ctx_;
  const OpTable& ops = c.ops();
  const Shape shape = x.shape();
  const int64_t n = x.numel();
  const Tensor n1 = c.work(shape);
  norm1_->forward(x, n1, s.n1);
  c.round_gemm_input(n1);
  if (cfg_.parallel_residual) {
    Tensor out = activation(c.device(), shape);
    attention(n1, out, s, kv);
    const Tensor n2 = c.work(shape);
    norm2_->forward(x, n2, s.n2);
    c.round_gemm_input(n2);
    const Tensor m = temporary(c.device(), shape);
    mlp_->forward(n2, m, s.mlp);
    ops.add(f32(out), f32(out), f32(m), n);  // attn + mlp
    ops.add(f32(out), f32(out), f32(x), n);  // + x
    return out;
  }
  const Tensor h = activation(c.device(), shape);  // h = x + attn(norm1(x))
  attention(n1, h, s, kv);
  ops.add(f32(h), f32(h), f32(x), n);
  const Tensor n2 = c.work(shape);
  norm2_->forward(h, n2, s.n2);
  c.round_gemm_input(n2);
  Tensor out = activation(c.device(), shape);
  mlp_->forward(n2, out, s.mlp);
  ops.add(f32(out), f32(out), f32(h), n);  // out = h + mlp(norm2(h))
  return out;
}

void DecoderLayer::attention(const Tensor& n1, const Tensor& out, Saved& s,
                             const KVSlot* kv) const {
  if (kv)
    attn_->forward_cached(n1, out, *kv);
  else
    attn_->forward(n1, out, s.attn);
}

void DecoderLayer::backward(const Tensor& dres, Saved& s) const {
  if (cfg_.parallel_residual) {
    // Both branches read d/d(out) before the norms add their input gradients into dres.
    Tensor dn2 = mlp_->backward(dres, s.mlp);
    Tensor dn1 = attn_->backward(dres, s.attn);
    norm2_->backward(dn2, s.n2, dres);
    dn2.reset();
    norm1_->backward(dn1, s.n1, dres);
    return;
  }
  {
    Tensor dn2 = mlp_->backward(dres, s.mlp);
    norm2_->backward(dn2, s.n2, dres);  // dres = d/dh
  }
  Tensor dn1 = attn_->backward(dres, s.attn);
  norm1_->backward(dn1, s.n1, dres);  // dres = d/dx
}

void DecoderLayer::compact(Saved& s) const {
  attn_->compact(s.attn);
  mlp_->compact(s.mlp);
}

void DecoderLayer::widen(Saved& s) const {
  attn_->widen(s.attn);
  mlp_->widen(s.mlp);
}

void DecoderLayer::drop_selective(Saved& s) const {
  attn_->drop_input(s.attn);
  attn_->drop_selective(s.attn);
  mlp_->drop_input(s.mlp);
  mlp_->drop_selective(s.mlp);
}

void DecoderLayer::recompute_selective(Saved& s) const {
  const RunContext& c = *ctx_;
  const Tensor n1 = c.work(s.n1.in.shape());
  norm1_->recompute(s.n1, n1);
  c.round_gemm_input(n1);
  attn_->set_input(s.attn, n1);
  attn_->recompute(s.attn);
  const Tensor n2 = c.work(s.n2.in.shape());
  norm2_->recompute(s.n2, n2);
  c.round_gemm_input(n2);
  mlp_->set_input(s.mlp, n2);
  mlp_->recompute(s.mlp);
}

std::vector<Linear*> DecoderLayer::linears() {
  std::vector<Linear*> out = attn_->linears();
  for (Linear* l : mlp_->linears()) out.push_back(l);
  return out;
}

}  // namespace snug::nn

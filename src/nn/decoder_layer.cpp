#include "nn/decoder_layer.h"

#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

DecoderLayer::DecoderLayer(ParameterStore& ps, const std::string& prefix,
                           const DecoderLayerConfig& cfg)
    : dev_(&ps.device()), cfg_(cfg) {
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

Tensor DecoderLayer::forward(const Tensor& x, Saved& s) const {
  const OpTable& ops = dev_->ops();
  const Shape shape = x.shape();
  const int64_t n = x.numel();
  Tensor out = activation(*dev_, shape);
  {
    const Tensor n1 = activation(*dev_, shape);
    norm1_->forward(x, n1, s.n1);
    attn_->forward(n1, out, s.attn);  // out = attn(norm1(x)) for now
  }
  if (cfg_.parallel_residual) {
    const Tensor n2 = activation(*dev_, shape);
    norm2_->forward(x, n2, s.n2);
    const Tensor m = temporary(*dev_, shape);
    mlp_->forward(n2, m, s.mlp);
    ops.add(f32(out), f32(out), f32(m), n);  // attn + mlp
    ops.add(f32(out), f32(out), f32(x), n);  // + x
    return out;
  }
  const Tensor h = out;  // h = x + attn(norm1(x)), in place
  ops.add(f32(h), f32(h), f32(x), n);
  out = activation(*dev_, shape);
  const Tensor n2 = activation(*dev_, shape);
  norm2_->forward(h, n2, s.n2);
  mlp_->forward(n2, out, s.mlp);
  ops.add(f32(out), f32(out), f32(h), n);  // out = h + mlp(norm2(h))
  return out;
}

void DecoderLayer::backward(const Tensor& dres, Saved& s) const {
  const Shape shape = dres.shape();
  if (cfg_.parallel_residual) {
    // Both branches read d/d(out) before the norms add their input gradients into dres.
    Tensor dn2 = temporary(*dev_, shape);
    mlp_->backward(dres, s.mlp, dn2);
    Tensor dn1 = temporary(*dev_, shape);
    attn_->backward(dres, s.attn, dn1);
    norm2_->backward(dn2, s.n2, dres);
    dn2.reset();
    norm1_->backward(dn1, s.n1, dres);
    return;
  }
  {
    Tensor dn2 = temporary(*dev_, shape);
    mlp_->backward(dres, s.mlp, dn2);
    norm2_->backward(dn2, s.n2, dres);  // dres = d/dh
  }
  Tensor dn1 = temporary(*dev_, shape);
  attn_->backward(dres, s.attn, dn1);
  norm1_->backward(dn1, s.n1, dres);  // dres = d/dx
}

}  // namespace snug::nn

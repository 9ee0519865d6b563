#include "nn/mlp.h"

#include "core/error.h"
#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

MLP::MLP(ParameterStore& ps, const std::string& prefix, const MLPConfig& cfg)
    : dev_(&ps.device()), cfg_(cfg) {
  SNUG_CHECK(cfg.hidden > 0 && cfg.intermediate > 0, prefix, ": MLP sizes ", cfg.hidden, " and ",
             cfg.intermediate, " must be positive");
  const std::string p = prefix + ".";
  if (gated())
    gate_.emplace(ps, p + cfg.gate_name, cfg.hidden, cfg.intermediate, cfg.bias, cfg.layout);
  up_.emplace(ps, p + cfg.up_name, cfg.hidden, cfg.intermediate, cfg.bias, cfg.layout);
  down_.emplace(ps, p + cfg.down_name, cfg.intermediate, cfg.hidden, cfg.bias, cfg.layout);
}

void MLP::forward(const Tensor& x, const Tensor& out, Saved& s) const {
  const OpTable& ops = dev_->ops();
  const int64_t B = x.dim(0), T = x.dim(1), I = cfg_.intermediate, n = B * T * I;
  s.pre = activation(*dev_, {B, T, I});
  if (gated()) {
    s.gate = activation(*dev_, {B, T, I});
    gate_->forward(x, s.gate, s.gate_lin);
  }
  up_->forward(x, s.pre, s.up_lin);
  const Tensor h = activation(*dev_, {B, T, I});
  if (cfg_.act == Activation::silu_gated)
    ops.swiglu_forward(f32(h), f32(s.gate), f32(s.pre), n);
  else if (cfg_.act == Activation::gelu_erf)
    ops.gelu_erf_forward(f32(h), f32(s.pre), n);
  else
    ops.gelu_forward(f32(h), f32(s.pre), n);
  down_->forward(h, out, s.down_lin);
}

void MLP::backward(const Tensor& dout, Saved& s, const Tensor& dx) const {
  const OpTable& ops = dev_->ops();
  const int64_t B = dout.dim(0), T = dout.dim(1), I = cfg_.intermediate, n = B * T * I;
  Tensor dh = temporary(*dev_, {B, T, I});
  down_->backward(dout, s.down_lin, dh, false);
  if (gated()) {
    Tensor dgate = temporary(*dev_, {B, T, I});
    // dup overwrites dh: swiglu_backward reads dh elementwise before writing it.
    ops.swiglu_backward(f32(dgate), f32(dh), f32(dh), f32(s.gate), f32(s.pre), n);
    s.gate.reset();
    s.pre.reset();
    gate_->backward(dgate, s.gate_lin, dx, false);
    dgate.reset();
    up_->backward(dh, s.up_lin, dx, true);
  } else {
    if (cfg_.act == Activation::gelu_erf)
      ops.gelu_erf_backward(f32(dh), f32(s.pre), f32(dh), n);
    else
      ops.gelu_backward(f32(dh), f32(s.pre), f32(dh), n);
    s.pre.reset();
    up_->backward(dh, s.up_lin, dx, false);
  }
}

}  // namespace snug::nn

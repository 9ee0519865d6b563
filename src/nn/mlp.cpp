#include "nn/mlp.h"

#include "core/error.h"
#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

MLP::MLP(ParameterStore& ps, const std::string& prefix, const MLPConfig& cfg)
    : ctx_(&ps.context()), cfg_(cfg) {
  SNUG_CHECK(cfg.hidden > 0 && cfg.intermediate > 0, prefix, ": MLP sizes ", cfg.hidden, " and ",
             cfg.intermediate, " must be positive");
  const std::string p = prefix + ".";
  if (gated())
    gate_.emplace(ps, p + cfg.gate_name, cfg.hidden, cfg.intermediate, cfg.bias, cfg.layout);
  up_.emplace(ps, p + cfg.up_name, cfg.hidden, cfg.intermediate, cfg.bias, cfg.layout);
  down_.emplace(ps, p + cfg.down_name, cfg.intermediate, cfg.hidden, cfg.bias, cfg.layout);
}

void MLP::activate(const Tensor& h, const Saved& s) const {
  const int64_t n = h.numel();
  const OpTable& ops = ctx_->ops();
  if (cfg_.act == Activation::silu_gated)
    ops.swiglu_forward(f32(h), f32(s.gate), f32(s.pre), n);
  else if (cfg_.act == Activation::gelu_erf)
    ops.gelu_erf_forward(f32(h), f32(s.pre), n);
  else
    ops.gelu_forward(f32(h), f32(s.pre), n);
  ctx_->round_gemm_input(h);
}

void MLP::forward(const Tensor& x, const Tensor& out, Saved& s) const {
  const RunContext& c = *ctx_;
  const int64_t B = x.dim(0), T = x.dim(1), I = cfg_.intermediate;
  s.pre = c.work({B, T, I});
  if (gated()) s.gate = c.work({B, T, I});
  const Tensor h = c.work({B, T, I});
  if (gated()) gate_->forward(x, s.gate, s.gate_lin);
  up_->forward(x, s.pre, s.up_lin);
  activate(h, s);
  down_->forward(h, out, s.down_lin);
}

Tensor MLP::backward(const Tensor& dout, Saved& s) const {
  const RunContext& c = *ctx_;
  const OpTable& ops = c.ops();
  const int64_t B = dout.dim(0), T = dout.dim(1), C = cfg_.hidden, I = cfg_.intermediate;
  const int64_t n = B * T * I;
  Tensor dh = temporary(c.device(), {B, T, I});
  {
    const Tensor dout16 =
        c.half_grad(dout, down_->weight(), down_->lora() != nullptr || !down_->bf16_path());
    down_->backward(dout16, s.down_lin, dh, false);
  }
  Tensor dx;
  if (gated()) {
    Tensor dgate = temporary(c.device(), {B, T, I});
    // dup overwrites dh: swiglu_backward reads dh elementwise before writing it.
    ops.swiglu_backward(f32(dgate), f32(dh), f32(dh), f32(s.gate), f32(s.pre), n);
    s.gate.reset();
    s.pre.reset();
    c.round_half(dgate);
    c.round_half(dh);
    dx = temporary(c.device(), {B, T, C});
    gate_->backward(dgate, s.gate_lin, dx, false);
    dgate.reset();
    up_->backward(dh, s.up_lin, dx, true);
  } else {
    if (cfg_.act == Activation::gelu_erf)
      ops.gelu_erf_backward(f32(dh), f32(s.pre), f32(dh), n);
    else
      ops.gelu_backward(f32(dh), f32(s.pre), f32(dh), n);
    c.round_half(dh);
    s.pre.reset();
    dx = temporary(c.device(), {B, T, C});
    up_->backward(dh, s.up_lin, dx, false);
  }
  c.round_half(dx);
  return dx;
}

void MLP::compact(Saved& s) const {
  ctx_->compact({&s.up_lin.in});             // the norm's output
  if (gated()) s.gate_lin.in = s.up_lin.in;  // one input, two projections
  ctx_->compact({&s.gate, &s.pre, &s.down_lin.in});
}

void MLP::widen(Saved& s) const {
  ctx_->widen({&s.up_lin.in}, /*gemm_inputs=*/true);
  if (gated()) s.gate_lin.in = s.up_lin.in;
  ctx_->widen({&s.gate, &s.pre}, false);
  ctx_->widen({&s.down_lin.in}, true);
}

void MLP::recompute(Saved& s) const {
  s.down_lin.in = ctx_->work(s.pre.shape());
  activate(s.down_lin.in, s);
}

std::vector<Linear*> MLP::linears() {
  std::vector<Linear*> out;
  if (gated()) out.push_back(&*gate_);
  out.insert(out.end(), {&*up_, &*down_});
  return out;
}

}  // namespace snug::nn

#include "nn/layernorm.h"

#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

LayerNorm::LayerNorm(ParameterStore& ps, const std::string& prefix, int64_t dim, float eps)
    : ctx_(&ps.context()), dim_(dim), eps_(eps) {
  w_ = ps.add(prefix + ".weight", {dim}, false);
  b_ = ps.add(prefix + ".bias", {dim}, false);
}

void LayerNorm::forward(const Tensor& in, const Tensor& out, NormSaved& s) const {
  const int64_t N = in.numel() / dim_;
  s.in = in;
  s.mean = activation(ctx_->device(), {N});
  s.rstd = activation(ctx_->device(), {N});
  recompute(s, out);
}

void LayerNorm::recompute(const NormSaved& s, const Tensor& out) const {
  const int64_t N = s.in.numel() / dim_;
  ctx_->ops().layernorm_forward(f32(out), f32(s.mean), f32(s.rstd), f32(s.in),
                                ctx_->vector_f32(w_).get(), ctx_->vector_f32(b_).get(), N, dim_,
                                eps_);
}

void LayerNorm::backward(const Tensor& dout, NormSaved& s, const Tensor& din) const {
  const int64_t N = s.in.numel() / dim_;
  float* dw = ctx_->grad(w_);
  float* db = ctx_->grad(b_);
  ctx_->ops().layernorm_backward(f32(din), dw, db, f32(dout), f32(s.in), ctx_->vector_f32(w_).get(),
                                 f32(s.mean), f32(s.rstd), N, dim_);
  s = {};
}

}  // namespace snug::nn

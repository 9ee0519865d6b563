#include "nn/rmsnorm.h"

#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

RMSNorm::RMSNorm(ParameterStore& ps, const std::string& prefix, int64_t dim, float eps)
    : ctx_(&ps.context()), dim_(dim), eps_(eps) {
  w_ = ps.add(prefix + ".weight", {dim}, false);
}

void RMSNorm::forward(const Tensor& in, const Tensor& out, NormSaved& s) const {
  const int64_t N = in.numel() / dim_;
  s.in = in;
  s.rstd = activation(ctx_->device(), {N});
  recompute(s, out);
}

void RMSNorm::recompute(const NormSaved& s, const Tensor& out) const {
  const int64_t N = s.in.numel() / dim_;
  ctx_->ops().rmsnorm_forward(f32(out), f32(s.rstd), f32(s.in), ctx_->vector_f32(w_).get(), N, dim_,
                              eps_);
}

void RMSNorm::backward(const Tensor& dout, NormSaved& s, const Tensor& din) const {
  const int64_t N = s.in.numel() / dim_;
  float* dw = ctx_->grad(w_);
  ctx_->ops().rmsnorm_backward(f32(din), dw, f32(dout), f32(s.in), ctx_->vector_f32(w_).get(),
                               f32(s.rstd), N, dim_);
  s = {};
}

}  // namespace snug::nn

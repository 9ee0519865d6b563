#include "nn/rmsnorm.h"

#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

RMSNorm::RMSNorm(ParameterStore& ps, const std::string& prefix, int64_t dim, float eps)
    : dev_(&ps.device()), dim_(dim), eps_(eps) {
  w_ = ps.add(prefix + ".weight", {dim}, false);
}

void RMSNorm::forward(const Tensor& in, const Tensor& out, NormSaved& s) const {
  const int64_t N = in.numel() / dim_;
  s.in = in;
  s.rstd = activation(*dev_, {N});
  dev_->ops().rmsnorm_forward(f32(out), f32(s.rstd), f32(in), value_of(w_), N, dim_, eps_);
}

void RMSNorm::backward(const Tensor& dout, NormSaved& s, const Tensor& din) const {
  const int64_t N = s.in.numel() / dim_;
  dev_->ops().rmsnorm_backward(f32(din), grad_of(w_), f32(dout), f32(s.in), value_of(w_),
                               f32(s.rstd), N, dim_);
  s = {};
}

}  // namespace snug::nn

#include "nn/layernorm.h"

#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

LayerNorm::LayerNorm(ParameterStore& ps, const std::string& prefix, int64_t dim, float eps)
    : dev_(&ps.device()), dim_(dim), eps_(eps) {
  w_ = ps.add(prefix + ".weight", {dim}, false);
  b_ = ps.add(prefix + ".bias", {dim}, false);
}

void LayerNorm::forward(const Tensor& in, const Tensor& out, NormSaved& s) const {
  const int64_t N = in.numel() / dim_;
  s.in = in;
  s.mean = activation(*dev_, {N});
  s.rstd = activation(*dev_, {N});
  dev_->ops().layernorm_forward(f32(out), f32(s.mean), f32(s.rstd), f32(in), value_of(w_),
                                value_of(b_), N, dim_, eps_);
}

void LayerNorm::backward(const Tensor& dout, NormSaved& s, const Tensor& din) const {
  const int64_t N = s.in.numel() / dim_;
  dev_->ops().layernorm_backward(f32(din), grad_of(w_), grad_of(b_), f32(dout), f32(s.in),
                                 value_of(w_), f32(s.mean), f32(s.rstd), N, dim_);
  s = {};
}

}  // namespace snug::nn

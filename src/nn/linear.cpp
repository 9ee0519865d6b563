#include "nn/linear.h"

#include "core/error.h"
#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

Linear::Linear(ParameterStore& ps, const std::string& prefix, int64_t in_features,
               int64_t out_features, bool bias, LinearLayout layout)
    : dev_(&ps.device()), in_(in_features), out_(out_features), layout_(layout) {
  SNUG_CHECK(in_ > 0 && out_ > 0, prefix, ": Linear sizes ", in_, " -> ", out_,
             " must be positive");
  const Shape shape = layout == LinearLayout::conv1d ? Shape{in_, out_} : Shape{out_, in_};
  w_ = ps.add(prefix + ".weight", shape, true);
  if (bias) b_ = ps.add(prefix + ".bias", {out_}, false);
}

void Linear::forward(const Tensor& in, const Tensor& out, Saved& s) const {
  const OpTable& ops = dev_->ops();
  const int64_t N = in.numel() / in_;
  SNUG_ASSERT(in.numel() == N * in_ && out.numel() == N * out_, "Linear shapes");
  if (layout_ == LinearLayout::conv1d)
    ops.linear_forward(f32(out), f32(in), value_of(w_), value_of(b_), N, in_, out_);
  else
    ops.linear_nt_forward(f32(out), f32(in), value_of(w_), value_of(b_), N, in_, out_);
  s.in = in;
}

void Linear::backward(const Tensor& dout, Saved& s, const Tensor& din, bool accumulate_din) const {
  const OpTable& ops = dev_->ops();
  const int64_t N = dout.numel() / out_;
  float* dw = grad_of(w_);
  float* db = grad_of(b_);
  if (layout_ == LinearLayout::linear) {
    ops.linear_nt_backward(f32(din), dw, db, f32(dout), f32(s.in), value_of(w_), N, in_, out_,
                           accumulate_din);
  } else if (!accumulate_din) {
    ops.linear_backward(f32(din), dw, db, f32(dout), f32(s.in), value_of(w_), N, in_, out_);
  } else {
    // Conv1D with an input gradient to add onto: din += dout W^T, then the parameter gradients.
    ops.gemm_f32(false, true, N, in_, out_, 1.0f, f32(dout), out_, value_of(w_), out_, 1.0f,
                 f32(din), in_);
    ops.linear_backward(nullptr, dw, db, f32(dout), f32(s.in), value_of(w_), N, in_, out_);
  }
  s.in.reset();
}

}  // namespace snug::nn

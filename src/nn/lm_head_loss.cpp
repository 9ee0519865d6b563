#include "nn/lm_head_loss.h"

#include "core/error.h"
#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::nn {

LMHeadLoss::LMHeadLoss(ParameterStore& ps, const std::string& name, int64_t hidden, int64_t vocab,
                       Parameter* tied)
    : dev_(&ps.device()), hidden_(hidden), vocab_(vocab) {
  if (tied) {
    SNUG_CHECK(tied->shape() == Shape({vocab, hidden}), name, ": tied weight ", tied->name,
               " has shape ", shape_str(tied->shape()), ", not (", vocab, ",", hidden, ")");
    w_ = tied;
  } else {
    w_ = ps.add(name + ".weight", {vocab, hidden}, true);
  }
}

double LMHeadLoss::forward(const Tensor& x, const Tensor& targets, bool for_backward,
                           float loss_scale, Saved& s) const {
  const OpTable& ops = dev_->ops();
  const int64_t N = x.numel() / hidden_, V = vocab_;
  const int32_t* tg = targets.data<int32_t>();
  const int64_t valid = ops.count_valid_targets(tg, N);
  const int64_t chunk = kernels::lm_head_default_chunk(N, V);
  const Tensor scratch = temporary(*dev_, {kernels::lm_head_scratch_floats(N, V, chunk)});
  float* dw = nullptr;
  if (for_backward) {
    s.dx = temporary(*dev_, x.shape());
    dw = grad_of(w_);
  }
  const float scale = valid > 0 ? loss_scale / static_cast<float>(valid) : 0.0f;
  const double sum = ops.lm_head_xent(nullptr, f32(s.dx), dw, f32(x), value_of(w_), tg, N, hidden_,
                                      V, scale, f32(scratch), chunk);
  return valid > 0 ? sum / static_cast<double>(valid) : 0.0;
}

Tensor LMHeadLoss::backward(Saved& s) const {
  SNUG_CHECK(s.dx.defined(), "LM head backward: needs a forward with for_backward");
  return std::move(s.dx);
}

}  // namespace snug::nn

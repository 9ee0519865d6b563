// Language-model head + mean cross-entropy, chunked (kernels/lm_head.h): logits = x W^T with W
// (V, C) in nn.Linear layout (its own lm_head.weight, or the token embedding when tied), computed
// and consumed a chunk of rows at a time, so the (B,T,V) logits never exist. When training, the
// head's gradient is produced in the same pass as the loss (dx kept for backward, dW accumulated
// in forward), so no logits are recomputed; GPT-2 runs its head this way.
//
// Saved: `dx` (B,T,C) the input gradient produced in forward (category temporary).
// Scratch during forward: chunk * V floats (temporary, lm_head_scratch_floats).
// Later steps (docs/design.md): full logits (for generation), a deferred head gradient for the
// grad-ready hook, the 16-bit path, label smoothing / z-loss if a family needs them.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "nn/parameter_store.h"

namespace snug::nn {

class LMHeadLoss {
 public:
  struct Saved {
    Tensor dx;  // (B,T,C)
  };

  // tied: the (V, C) parameter to reuse (no parameter is registered); else registers
  // <name>.weight (V, C).
  LMHeadLoss(ParameterStore& ps, const std::string& name, int64_t hidden, int64_t vocab,
             Parameter* tied = nullptr);

  // Mean cross-entropy of softmax(x W^T) against targets (B,T) int32 (rows < 0 ignored) over the
  // valid targets, in double (0 when none are valid, and on meta). With for_backward, the
  // gradient of loss_scale * mean loss goes to s.dx and W's gradient.
  double forward(const Tensor& x, const Tensor& targets, bool for_backward, float loss_scale,
                 Saved& s) const;
  // The input gradient forward produced (and s released).
  Tensor backward(Saved& s) const;

  Parameter* weight() const { return w_; }

 private:
  Device* dev_;
  int64_t hidden_, vocab_;
  Parameter* w_;
};

}  // namespace snug::nn

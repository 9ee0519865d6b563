// Language-model head + mean cross-entropy: logits = x W^T (+ b) with W (V, C) in nn.Linear layout
// (its own lm_head.weight, or the token embedding when tied), in one of two modes
// (nn/run_options.h):
//   chunked  computed and consumed a chunk of rows at a time (kernels/lm_head.h), so the (B,T,V)
//            logits never exist. When training, the head's gradient is produced in the same pass
//            as the loss (dx kept for backward, dW accumulated in forward), so no logits are
//            recomputed; with `defer_weight_grad` (a grad-ready hook wants W's gradient to exist
//            only at the end of backward) forward keeps x instead and weight_backward()
//            recomputes the logits chunk by chunk for dW.
//   full     the (B,T,V) logits are kept (category activations) and turned into probabilities
//            and then dlogits in place; logits-only forwards (no targets) use this mode.
// The weight is read through the RunContext (16-bit compute copy, bf16 GEMM path); the logits
// are fp32 from a 16-bit GEMM under mixed precision (Hugging Face upcasts them for the loss).
//
// Saved, N = B*T rows:
//   x        (B,T,C)  the head's input (full mode, or deferred dW)
//   targets  (B,T)    int32 (input_data)
//   dx       (B,T,C)  chunked: the input gradient produced in forward (temporary)
//   probs    (B,T,V)  full: logits -> probabilities -> dlogits
//   losses   (B,T)    full with targets: per-token losses
// Scratch during a chunked pass: lm_head_scratch_floats(N, V, chunk) floats (temporary).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "nn/parameter_store.h"
#include "nn/run_options.h"

namespace snug::nn {

class LMHeadLoss {
 public:
  struct Saved {
    Tensor x, targets, dx, probs, losses;
    int64_t valid = 0;  // targets >= 0
    float loss_scale = 1.0f;
    bool deferred = false;  // W's gradient waits for weight_backward()
  };

  // tied: the (V, C) parameter to reuse (no parameter is registered); else registers
  // <name>.weight (V, C). bias: an output bias (V) the model registered where its Hugging Face
  // order puts it (BERT's cls.predictions.bias), or none; a head with a bias runs in full mode
  // only (the chunked kernels have no bias): forward refuses chunked mode.
  LMHeadLoss(ParameterStore& ps, const std::string& name, int64_t hidden, int64_t vocab,
             Parameter* tied = nullptr, Parameter* bias = nullptr);

  // Mean cross-entropy of softmax(x W^T) against `targets` (B,T) int32 (ids < 0 ignored) over
  // the `valid` targets (the caller counts its host batch), in double (0 when none are valid,
  // and on meta). Undefined targets: logits only (full mode). With for_backward the gradient is
  // that of loss_scale * mean loss.
  double forward(const Tensor& x, const Tensor& targets, int64_t valid, LogitsMode mode,
                 bool for_backward, float loss_scale, bool defer_weight_grad, Saved& s) const;
  // The input gradient (B,T,C) (chunked: the one forward produced; full: computed now, with W's
  // gradient), rounded to the compute dtype. s keeps only what weight_backward() needs.
  Tensor backward(Saved& s) const;
  // Deferred W's gradient from logits recomputed chunk by chunk (the same kernel and inputs as
  // forward: the values forward would have added). Releases s.
  void weight_backward(Saved& s) const;

  Parameter* weight() const { return w_; }
  Parameter* bias() const { return b_; }

 private:
  // One chunked pass: loss sum, and dx / dW when not null.
  double chunked(const Tensor& x, const Saved& s, float* dx, float* dw) const;

  RunContext* ctx_;
  int64_t hidden_, vocab_;
  Parameter* w_;
  Parameter* b_ = nullptr;
};

}  // namespace snug::nn

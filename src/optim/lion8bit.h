// 8-bit Lion with bitsandbytes semantics (bitsandbytes optim/lion.py Lion8bit = Lion(optim_bits=8);
// the 1-state block-wise kernel kOptimizerStatic8bit1StateBlockwise and its CPU port
// backends/cpu/ops.py::_optimizer_update_8bit_blockwise_cpu), the HF Trainer's
// optim="lion_8bit". Lion itself: Chen et al. 2023, arXiv:2302.06675 (optim/lion.h).
//
// State: exp_avg as u8 codes into the signed dynamic map (optim/quant8.h), one fp32 absmax per
// 256-element block. Every step, per element: dequantize m = code * absmax, then in fp32
//   (non-finite g: m set to 0, parameter untouched)
//   p *= 1 - lr * wd                              (decoupled weight decay, if wd > 0)
//   p -= lr * sign(b1 m + (1 - b1) g)             (sign(0) = 0)
//   m  = b2 m + (1 - b2) g
// then the block's new absmax = max |m| and each m is requantized to the nearest code with
// bitsandbytes' sign fix. Codes and absmax start at 0 (bitsandbytes' initial state).
//
// Which tensors are 8-bit follows Optimizer8bit::uses_8bit (bitsandbytes min_8bit_size = 4096; the
// embeddings stay fp32 unless optim_8bit_embeddings, as the HF Trainer overrides nn.Embedding);
// the others keep an fp32 exp_avg and the same update. Bytes: 8-bit tensors 1 byte/param + 4
// bytes per block (about 1.016 bytes/param), fp32 ones 4 bytes/param. Betas are lion_beta1/2.
#pragma once

#include "optim/optimizer8bit.h"

namespace snug {

class Lion8bit final : public Optimizer8bit {
 public:
  Lion8bit(const ParameterList& params, const OptimizerOptions& opts);
  std::string name() const override { return "lion_8bit"; }
  // Bytes of state for one parameter.
  static int64_t state_bytes(const Parameter& p, const OptimizerOptions& opts) {
    return Optimizer8bit::state_bytes(p, opts, 1);
  }

 private:
  void update(State& s, const OpTable& ops, float* w, const float* g, int64_t n, float lr,
              float wd) override;
};

}  // namespace snug

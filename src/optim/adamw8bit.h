// 8-bit AdamW with bitsandbytes semantics (Dettmers et al. 2022, arXiv:2110.02861;
// bitsandbytes optim/adamw.py AdamW(optim_bits=8), csrc/kernels.cu
// kOptimizerStatic8bit2StateBlockwise), the HF Trainer's optim="adamw_bnb_8bit" / "adamw_8bit".
//
// States: exp_avg as u8 codes into the signed dynamic map, exp_avg_sq as u8 codes into the
// unsigned one (optim/quant8.h), each with one fp32 absmax per 256-element block. Every step, per
// element: dequantize (code * absmax), then in fp32
//   (non-finite g: both states set to 0, parameter untouched)
//   v = b2 v + (1 - b2) g^2;  m = b1 m + (1 - b1) g
//   p += -lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + sqrt(1 - b2^t) * eps)
//   p *= 1 - lr * wd                         (if wd > 0; after the step, as the 8-bit kernel does)
// then the block's new absmax = max |state| and each state is requantized to the nearest code
// (the first moment with bitsandbytes' sign fix). Codes start at 0 and absmax at 0, as
// bitsandbytes initialises them.
//
// Tensors with fewer than min_8bit_size (4096) elements keep fp32 states (8 bytes/param), and
// so do the embeddings (names containing "wte" or "wpe") unless optim_8bit_embeddings is set:
// the HF Trainer overrides nn.Embedding to 32-bit states (transformers #14819). The fp32
// tensors use the same update formula. 8-bit tensors cost 2 bytes/param + 8 bytes per block.
#pragma once

#include <string>

#include "optim/optimizer8bit.h"

namespace snug {

class AdamW8bit final : public Optimizer8bit {
 public:
  AdamW8bit(const ParameterList& params, const OptimizerOptions& opts, std::string name);
  std::string name() const override { return name_; }
  // Bytes of state for one parameter.
  static int64_t state_bytes(const Parameter& p, const OptimizerOptions& opts) {
    return Optimizer8bit::state_bytes(p, opts, 2);
  }

 private:
  void update(State& s, const OpTable& ops, float* w, const float* g, int64_t n, float lr,
              float wd) override;
  std::string name_;
};

}  // namespace snug

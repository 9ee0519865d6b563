// Linear block: out = in W + b over the last dimension, with the weight in the layout its
// checkpoint stores:
//   conv1d  (in, out)   GPT-2's Conv1D (kernels linear_forward/linear_backward);
//   linear  (out, in)   torch.nn.Linear, every other family (linear_nt_forward/backward).
// Parameters: <prefix>.weight, and <prefix>.bias (out) when `bias`.
//
// Saved: `in` (N, in), the input, which the weight gradient reads. Blocks that feed one input to
// several Linears (q/k/v projections) hand each the same Tensor: storage is shared, so it is
// counted once and freed when the last Saved lets go.
//
// Later steps (docs/design.md, "Blocks and the op table"): LoRA adapters, quantized base
// storage, 16-bit compute copies and bf16-full storage belong here, behind the same interface.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "nn/parameter_store.h"

namespace snug::nn {

enum class LinearLayout { conv1d, linear };

class Linear {
 public:
  struct Saved {
    Tensor in;  // (N, in_features)
  };

  Linear(ParameterStore& ps, const std::string& prefix, int64_t in_features, int64_t out_features,
         bool bias, LinearLayout layout);

  // out (N, out) = in (N, in) W + b; out is the caller's (its category is the caller's choice).
  // Keeps `in` in s.
  void forward(const Tensor& in, const Tensor& out, Saved& s) const;
  // din (N, in) = dout W^T (overwrite, or += when accumulate_din; skipped when din is undefined);
  // W and b gradients accumulate. Releases s.
  void backward(const Tensor& dout, Saved& s, const Tensor& din, bool accumulate_din) const;

  Parameter* weight() const { return w_; }
  Parameter* bias() const { return b_; }
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }

 private:
  Device* dev_;
  int64_t in_, out_;
  LinearLayout layout_;
  Parameter* w_;
  Parameter* b_ = nullptr;
};

}  // namespace snug::nn

// Linear block: out = in W + b over the last dimension, with the weight in the layout its
// checkpoint stores:
//   conv1d  (in, out)   GPT-2's Conv1D (kernels linear_forward/linear_backward);
//   linear  (out, in)   torch.nn.Linear, every other family (linear_nt_forward/backward).
// Parameters: <prefix>.weight (quantizable: --load-in-8bit/4bit store it quantized and frozen),
// and <prefix>.bias (out) when `bias`.
//
// The weight is read through the model's RunContext (nn/run_context.h): fp32, its 16-bit compute
// copy widened, bf16 values (--bf16-full) widened, or dequantized per use; on the bf16 GEMM path
// (conv1d) gemm_bf16 reads 16-bit operands directly. The output is rounded to the compute dtype.
//
// LoRA (nn/lora.h): add_lora() attaches a trainable bypass, out += s dropout(in) A^T B^T.
//
// Saved, N rows:
//   in      (N, in)   the input, which the weight gradient reads. Blocks that feed one input to
//                     several Linears hand each the same Tensor: storage is shared, so it is
//                     counted once and freed when the last Saved lets go.
//   lora_u  (N, r)    LoRA: dropout(in) A^T
//   lora_in (N, in)   LoRA with dropout: the dropped-out input A's gradient reads
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "nn/lora.h"
#include "nn/parameter_store.h"

namespace snug::nn {

enum class LinearLayout { conv1d, linear };

class Linear {
 public:
  struct Saved {
    Tensor in;       // (N, in_features)
    Tensor lora_u;   // (N, r)
    Tensor lora_in;  // (N, in_features), LoRA dropout only
  };

  Linear(ParameterStore& ps, const std::string& prefix, int64_t in_features, int64_t out_features,
         bool bias, LinearLayout layout);

  // out (N, out) = in (N, in) W + b (+ the LoRA bypass), rounded to the compute dtype; out is
  // the caller's (its category is the caller's choice). Keeps `in` in s.
  void forward(const Tensor& in, const Tensor& out, Saved& s) const;
  // din (N, in) = dout W^T (overwrite, or += when accumulate_din; skipped when din is undefined);
  // W and b gradients accumulate, and the adapter's. dout may be bf16 (RunContext::half_grad).
  // Releases s.
  void backward(const Tensor& dout, Saved& s, const Tensor& din, bool accumulate_din) const;

  // A LoRA adapter on this Linear: registers <prefix>.lora_A.weight (r, in) and
  // <prefix>.lora_B.weight (out, r), fp32, and returns its description (`layer`, `slot` key its
  // dropout masks). A and B are left for the caller to initialize.
  const LoraAdapter& add_lora(ParameterStore& ps, int64_t r, int64_t layer, int slot);
  const LoraAdapter* lora() const { return lora_ ? &*lora_ : nullptr; }

  // The weight with the adapter merged, in this Linear's layout (what PEFT's merge_and_unload
  // writes): host memory.
  std::vector<float> merged_weight() const;

  Parameter* weight() const { return w_; }
  Parameter* bias() const { return b_; }
  const std::string& name() const { return name_; }
  int64_t in_features() const { return in_; }
  int64_t out_features() const { return out_; }
  LinearLayout layout() const { return layout_; }

  // Its GEMMs take bf16 operands (the bf16 GEMM path, Conv1D layout); otherwise fp32.
  bool bf16_path() const;

 private:
  RunContext* ctx_;
  std::string name_;
  int64_t in_, out_;
  LinearLayout layout_;
  Parameter* w_;
  Parameter* b_ = nullptr;
  std::optional<LoraAdapter> lora_;
};

}  // namespace snug::nn

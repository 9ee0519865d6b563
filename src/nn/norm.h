// Normalization over the last dimension, the two kinds the families use:
//   layer  LayerNorm (weight and bias; GPT-2, GPT-NeoX, BERT)       nn/layernorm.h
//   rms    RMSNorm (weight only; Llama, Mistral, Qwen2)             nn/rmsnorm.h
// Norm picks one by configuration (not by device) so layer wiring is written once.
//
// Saved (NormSaved): `in` (N,C) the input, `rstd` (N) and, LayerNorm only, `mean` (N).
// The input is usually the residual stream, kept anyway; the statistics are what the norm adds.
// The input gradient ACCUMULATES into din (the residual stream's gradient is a sum).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/tensor.h"
#include "nn/parameter_store.h"

namespace snug::nn {

struct NormSaved {
  Tensor in;    // (N, C)
  Tensor mean;  // (N) LayerNorm only
  Tensor rstd;  // (N)
};

enum class NormKind { layer, rms };

class LayerNorm;
class RMSNorm;

class Norm {
 public:
  // Parameters <prefix>.weight (C) and, LayerNorm, <prefix>.bias (C).
  Norm(ParameterStore& ps, const std::string& prefix, int64_t dim, NormKind kind, float eps);
  ~Norm();
  Norm(Norm&&) noexcept;
  Norm& operator=(Norm&&) noexcept;

  // out (N,C) from in (N,C); keeps in and the statistics (activations) in s.
  void forward(const Tensor& in, const Tensor& out, NormSaved& s) const;
  // din += d/d(in); weight (and bias) gradients accumulate. Releases s.
  void backward(const Tensor& dout, NormSaved& s, const Tensor& din) const;
  // out from s.in again (selective checkpointing), rewriting the statistics with the same values.
  void recompute(const NormSaved& s, const Tensor& out) const;
  Parameter* weight() const;

 private:
  std::unique_ptr<LayerNorm> layer_;
  std::unique_ptr<RMSNorm> rms_;
};

}  // namespace snug::nn

// RMSNorm block: out = weight * (in * rstd), rstd = 1/sqrt(mean(in^2) + eps) over the last
// dimension C (Llama's LlamaRMSNorm; no bias, no mean). Parameter <prefix>.weight (C).
// Saved (nn/norm.h NormSaved): in (N,C), rstd (N).
#pragma once

#include <cstdint>
#include <string>

#include "nn/norm.h"

namespace snug::nn {

class RMSNorm {
 public:
  RMSNorm(ParameterStore& ps, const std::string& prefix, int64_t dim, float eps);
  void forward(const Tensor& in, const Tensor& out, NormSaved& s) const;
  // din += ; dweight += . Releases s.
  void backward(const Tensor& dout, NormSaved& s, const Tensor& din) const;
  // out from s.in again, rewriting s's statistics with the values forward wrote.
  void recompute(const NormSaved& s, const Tensor& out) const;
  Parameter* weight() const { return w_; }

 private:
  RunContext* ctx_;
  int64_t dim_;
  float eps_;
  Parameter* w_;
};

}  // namespace snug::nn

// LayerNorm block: out = (in - mean) * rstd * weight + bias over the last dimension C, biased
// variance (torch.nn.LayerNorm). Parameters <prefix>.weight (C), <prefix>.bias (C).
// Saved (nn/norm.h NormSaved): in (N,C), mean (N), rstd (N).
#pragma once

#include <cstdint>
#include <string>

#include "nn/norm.h"

namespace snug::nn {

class LayerNorm {
 public:
  LayerNorm(ParameterStore& ps, const std::string& prefix, int64_t dim, float eps);
  void forward(const Tensor& in, const Tensor& out, NormSaved& s) const;
  // din += ; dweight += ; dbias += . Releases s.
  void backward(const Tensor& dout, NormSaved& s, const Tensor& din) const;
  // out from s.in again, rewriting s's statistics with the values forward wrote.
  void recompute(const NormSaved& s, const Tensor& out) const;
  Parameter* weight() const { return w_; }
  Parameter* bias() const { return b_; }

 private:
  RunContext* ctx_;
  int64_t dim_;
  float eps_;
  Parameter* w_;
  Parameter* b_;
};

}  // namespace snug::nn

#include "nn/norm.h"

#include "nn/layernorm.h"
#include "nn/rmsnorm.h"

namespace snug::nn {

Norm::Norm(ParameterStore& ps, const std::string& prefix, int64_t dim, NormKind kind, float eps) {
  if (kind == NormKind::layer)
    layer_ = std::make_unique<LayerNorm>(ps, prefix, dim, eps);
  else
    rms_ = std::make_unique<RMSNorm>(ps, prefix, dim, eps);
}

Norm::~Norm() = default;
Norm::Norm(Norm&&) noexcept = default;
Norm& Norm::operator=(Norm&&) noexcept = default;

void Norm::forward(const Tensor& in, const Tensor& out, NormSaved& s) const {
  if (layer_)
    layer_->forward(in, out, s);
  else
    rms_->forward(in, out, s);
}

void Norm::backward(const Tensor& dout, NormSaved& s, const Tensor& din) const {
  if (layer_)
    layer_->backward(dout, s, din);
  else
    rms_->backward(dout, s, din);
}

void Norm::recompute(const NormSaved& s, const Tensor& out) const {
  if (layer_)
    layer_->recompute(s, out);
  else
    rms_->recompute(s, out);
}

Parameter* Norm::weight() const {
  return layer_ ? layer_->weight() : rms_->weight();
}

}  // namespace snug::nn

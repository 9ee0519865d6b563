#include "train/grad_norm.h"

#include <algorithm>

#include "kernels/op_table.h"

namespace snug {

double grad_sum_squares(const Parameter& p) {
  if (!p.grad.defined() || p.grad.is_meta()) return 0.0;
  const OpTable& ops = p.grad.device().ops();
  if (p.grad.dtype() == DType::bf16) return ops.sum_squares_bf16(p.grad.data_u16(), p.grad.numel());
  return ops.sum_squares(p.grad.data<float>(), p.grad.numel());
}

double grad_sum_squares(const ParameterList& params) {
  double sq = 0.0;
  for (const Parameter* p : params) sq += grad_sum_squares(*p);
  return sq;
}

double clip_coefficient(double norm, double max_norm) {
  return std::min(1.0, max_norm / (norm + 1e-6));
}

void scale_gradients(const ParameterList& params, double coef) {
  for (Parameter* p : params) {
    if (!p->grad.defined() || p->grad.is_meta()) continue;
    const OpTable& ops = p->grad.device().ops();
    if (p->grad.dtype() == DType::bf16)
      ops.scale_bf16(p->grad.data_u16(), static_cast<float>(coef), p->grad.numel());
    else
      ops.scale(p->grad.data<float>(), static_cast<float>(coef), p->grad.numel());
  }
}

}  // namespace snug

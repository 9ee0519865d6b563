#include "train/grad_norm.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/op_table.h"

namespace snug {

std::vector<double> grad_sums_of_squares(const std::vector<const Tensor*>& grads) {
  std::vector<double> out(grads.size(), 0.0);
  std::vector<const Tensor*> live;  // defined and not meta, grouped below by device
  std::vector<size_t> at;
  for (size_t i = 0; i < grads.size(); ++i)
    if (grads[i]->defined() && !grads[i]->is_meta()) {
      live.push_back(grads[i]);
      at.push_back(i);
    }
  for (size_t b = 0; b < live.size();) {
    // One call per run of gradients on one device (a model's are all on one).
    size_t e = b + 1;
    while (e < live.size() && &live[e]->device() == &live[b]->device()) ++e;
    const size_t n = e - b;
    std::vector<const void*> xs(n);
    std::vector<int64_t> ns(n);
    const std::unique_ptr<bool[]> bf16(new bool[n]);
    for (size_t i = 0; i < n; ++i) {
      const Tensor& g = *live[b + i];
      bf16[i] = g.dtype() == DType::bf16;
      xs[i] = bf16[i] ? static_cast<const void*>(g.data_u16()) : g.data<float>();
      ns[i] = g.numel();
    }
    std::vector<double> sums(n);
    live[b]->device().ops().sum_squares_each(sums.data(), xs.data(), ns.data(), bf16.get(),
                                             static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) out[at[b + i]] = sums[i];
    b = e;
  }
  return out;
}

double grad_sum_squares(const Parameter& p) {
  return grad_sums_of_squares({&p.grad})[0];
}

double grad_sum_squares(const ParameterList& params) {
  std::vector<const Tensor*> grads;
  grads.reserve(params.size());
  for (const Parameter* p : params) grads.push_back(&p->grad);
  double sq = 0.0;
  for (const double s : grad_sums_of_squares(grads)) sq += s;  // in the list's order
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

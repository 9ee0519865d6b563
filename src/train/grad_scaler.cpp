#include "train/grad_scaler.h"

#include <cmath>
#include <vector>

#include "core/error.h"
#include "kernels/op_table.h"
#include "train/grad_norm.h"

namespace snug {

GradScaler::GradScaler(const GradScalerOptions& o) : o_(o), scale_(o.init_scale) {
  SNUG_CHECK(o.init_scale > 0 && o.growth_factor > 1 && o.backoff_factor > 0 &&
                 o.backoff_factor < 1 && o.growth_interval > 0,
             "GradScaler: invalid options");
}

bool GradScaler::unscale_and_check(const ParameterList& params) {
  const auto inv = static_cast<float>(1.0 / scale_);
  std::vector<const Tensor*> grads;
  for (Parameter* p : params) {
    if (!p->grad.defined() || p->grad.is_meta()) continue;
    p->grad.device().ops().scale(p->grad.data<float>(), inv, p->grad.numel());
    grads.push_back(&p->grad);
  }
  // A sum of squares is inf/NaN exactly when some element is (or the sum overflows double,
  // which needs values beyond 1e150: not finite in fp16 terms either). All of them come back
  // together (grad_sums_of_squares).
  bool found_inf = false;
  for (const double s : grad_sums_of_squares(grads))
    if (!std::isfinite(s)) found_inf = true;
  return found_inf;
}

void GradScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ *= o_.backoff_factor;
    tracker_ = 0;
    ++skipped_;
    return;
  }
  if (++tracker_ >= o_.growth_interval) {
    scale_ *= o_.growth_factor;
    tracker_ = 0;
  }
}

}  // namespace snug

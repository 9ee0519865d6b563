// Dynamic loss scaling for fp16 training, with torch.cuda.amp.GradScaler's rules and defaults:
// the loss is multiplied by `scale` before backward; before the optimizer step the gradients
// are divided by it and checked; a step whose gradients hold inf/NaN is skipped and the scale
// multiplied by backoff_factor (0.5); after growth_interval (2000) consecutive good steps the
// scale is multiplied by growth_factor (2). Initial scale 2^16.
#pragma once

#include <cstdint>

#include "nn/parameter.h"

namespace snug {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& o = {});
  double scale() const { return scale_; }
  // Divides every defined gradient by the scale (in place) and reports whether any gradient
  // element is inf or NaN (the step must then be skipped). Meta tensors are skipped.
  bool unscale_and_check(const ParameterList& params);
  // After a step: found_inf -> scale *= backoff, streak reset; else after growth_interval good
  // steps in a row scale *= growth.
  void update(bool found_inf);
  int64_t skipped_steps() const { return skipped_; }
  int64_t growth_tracker() const { return tracker_; }

 private:
  GradScalerOptions o_;
  double scale_;
  int64_t tracker_ = 0;
  int64_t skipped_ = 0;
};

}  // namespace snug

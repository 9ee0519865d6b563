// Grad-ready listeners: what backward hands each parameter to as soon as its gradient is final for
// that backward (Model::add_grad_ready_listener, models/model.h). Optimizer-in-backward (LOMO,
// train/fused_step.h) updates the parameter and frees its gradient there; a data-parallel
// communicator (issue 30) starts the all-reduce of a bucket of them while backward goes on.
//
// Listening changes nothing about the numbers or the memory of a backward: the model runs the
// same kernels in the same order whoever listens (or nobody). What a listener does with the
// gradient is its own business (freeing it frees memory, of course).
//
// Several listeners may subscribe. They are called in the order they subscribed, each only while
// the parameter still trains and has a gradient: a listener that consumes the gradient (frees it,
// as optimizer-in-backward does) therefore has to subscribe last, or the ones after it skip that
// parameter. Listeners must not subscribe or unsubscribe from inside a call.
//
// Each call says which micro-batch of the accumulation window the backward belongs to (whoever
// drives backward over a window tells the model: Model::set_micro_batch), so that a listener can
// act on the window's last micro-batch only (a gradient is the window's only then) or on every
// one (ZeRO stage 2 reduces each micro-batch's gradient at once).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "nn/parameter.h"

namespace snug {

// The micro-batch a backward belongs to, within its accumulation window.
struct GradReadyInfo {
  int64_t micro_batch = 0;        // 0-based
  int64_t num_micro_batches = 1;  // in the window (gradient accumulation steps)
  bool last_micro_batch = true;   // micro_batch + 1 == num_micro_batches
};

// Called with a parameter whose gradient is final for the backward that runs (see above).
using GradReadyListener = std::function<void(Parameter&, const GradReadyInfo&)>;
// What subscribing returns, to unsubscribe with (never 0).
using GradReadyId = uint64_t;

// The listeners a model keeps, and the micro-batch its backwards belong to.
class GradReadyListeners {
 public:
  GradReadyId add(GradReadyListener listener);
  // Throws snug::Error when `id` is not subscribed.
  void remove(GradReadyId id);
  bool empty() const { return list_.empty(); }
  // Micro-batch m (0-based) of n; 0 of 1 until told otherwise. Throws unless 0 <= m < n.
  void set_micro_batch(int64_t m, int64_t n);
  const GradReadyInfo& info() const { return info_; }
  // Hands `p` to each listener in subscription order while it trains and has a gradient.
  void notify(Parameter& p) const;

 private:
  std::vector<std::pair<GradReadyId, GradReadyListener>> list_;
  GradReadyId next_ = 1;
  GradReadyInfo info_;
};

}  // namespace snug

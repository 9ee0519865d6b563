#include "models/grad_ready.h"

#include <algorithm>

#include "core/error.h"

namespace snug {

GradReadyId GradReadyListeners::add(GradReadyListener listener) {
  SNUG_CHECK(static_cast<bool>(listener), "add_grad_ready_listener: empty listener");
  const GradReadyId id = next_++;
  list_.emplace_back(id, std::move(listener));
  return id;
}

void GradReadyListeners::remove(GradReadyId id) {
  const auto it = std::find_if(list_.begin(), list_.end(),
                               [id](const auto& entry) { return entry.first == id; });
  SNUG_CHECK(it != list_.end(), "remove_grad_ready_listener: no listener ", id, " is subscribed");
  list_.erase(it);
}

void GradReadyListeners::set_micro_batch(int64_t m, int64_t n) {
  SNUG_CHECK(n >= 1 && m >= 0 && m < n, "set_micro_batch: micro-batch ", m, " of ", n,
             " (needs 0 <= micro-batch < count)");
  info_.micro_batch = m;
  info_.num_micro_batches = n;
  info_.last_micro_batch = m + 1 == n;
}

void GradReadyListeners::notify(Parameter& p) const {
  for (const auto& [id, listener] : list_) {
    if (!p.requires_grad || !p.grad.defined()) return;  // an earlier listener consumed it
    listener(p, info_);
  }
}

}  // namespace snug

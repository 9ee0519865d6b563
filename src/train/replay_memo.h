// What lets a dry run replay a long run quickly and still exactly (plan/dry_run.h): on the meta
// device allocations depend on shapes only, so a step whose shapes all occurred before, from the
// same memory, allocates nothing the pool's peak has not already seen, and is skipped.
//
// A step is three kinds of phases, each entered with the same memory at every step after the
// first (the first creates the optimizer state): micro-batch 0's forward and backward (no
// gradients yet; its backward creates them), each later micro-batch's (gradients held), and the
// optimizer's update. So a step after the first may be skipped when its first micro-batch's
// columns occurred as a first micro-batch of such a step, and each later one's as a later one
// (whatever their order or step): its peak is at most one seen. Skipping a whole step leaves the
// memory as it was. Not for optimizers whose memory follows their step count (GaLore's projector
// refresh every --galore-update-proj-gap steps): they replay every step.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

namespace snug {

class ReplayMemo {
 public:
  // `on`: skipping allowed (meta, and an optimizer whose memory does not follow its steps).
  explicit ReplayMemo(bool on) : on_(on) {}
  // Whether the step of micro-batch columns `cols` can be skipped; `after_first`: a step after
  // the first that ran. A step that is not skipped is recorded (only after the first).
  bool skip_step(const std::vector<int64_t>& cols, bool after_first);

 private:
  bool on_;
  std::set<int64_t> first_, later_;  // columns seen as micro-batch 0 / as a later micro-batch
};

}  // namespace snug

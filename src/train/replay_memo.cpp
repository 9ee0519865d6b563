#include "train/replay_memo.h"

#include <cstddef>

namespace snug {

bool ReplayMemo::skip_step(const std::vector<int64_t>& cols, bool after_first) {
  if (!on_ || !after_first || cols.empty()) return false;
  bool seen = first_.count(cols[0]) > 0;
  for (std::size_t m = 1; seen && m < cols.size(); ++m) seen = later_.count(cols[m]) > 0;
  if (seen) return true;
  first_.insert(cols[0]);
  for (std::size_t m = 1; m < cols.size(); ++m) later_.insert(cols[m]);
  return false;
}

}  // namespace snug

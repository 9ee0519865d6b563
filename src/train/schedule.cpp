#include "train/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"
#include "io/excerpt.h"

namespace snug {

std::vector<std::string> scheduler_names() {
  return {"linear", "cosine", "constant", "constant_with_warmup"};
}

void validate_scheduler(const std::string& type) {
  const auto names = scheduler_names();
  if (std::find(names.begin(), names.end(), type) != names.end()) return;
  std::string known;
  for (const auto& n : names) {
    if (!known.empty()) known += ", ";
    known += n;
  }
  throw Error(detail::concat("--lr-scheduler-type: unknown schedule '", excerpt(type),
                             "' (known: ", known, ")"));
}

double lr_multiplier(const std::string& type, int64_t step, int64_t total, int64_t warmup) {
  if (type == "constant") return 1.0;
  if (step < warmup)
    return static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, warmup));
  if (type == "constant_with_warmup") return 1.0;
  const double rest = static_cast<double>(std::max<int64_t>(1, total - warmup));
  if (type == "linear") return std::max(0.0, static_cast<double>(total - step) / rest);
  if (type == "cosine") {
    const double progress = static_cast<double>(step - warmup) / rest;
    return std::max(0.0, 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
  }
  validate_scheduler(type);
  return 1.0;
}

}  // namespace snug

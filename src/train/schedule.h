// Learning-rate schedules with the formulas of transformers' get_scheduler (optimization.py):
// the multiplier at 0-based step s of `total`, with `warmup` linear warm-up steps.
//   constant:              1
//   constant_with_warmup:  s < warmup ? s / warmup : 1
//   linear:                s < warmup ? s / warmup : max(0, (total - s) / (total - warmup))
//   cosine:                s < warmup ? s / warmup : max(0, 0.5 (1 + cos(pi * progress)))
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace snug {

std::vector<std::string> scheduler_names();
// Throws snug::Error naming the flag and the accepted names for an unknown type.
void validate_scheduler(const std::string& type);
double lr_multiplier(const std::string& type, int64_t step, int64_t total, int64_t warmup);

}  // namespace snug

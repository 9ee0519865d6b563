// "What is the largest batch (or sequence) that fits?" answered exactly: every probe is a dry run
// on the meta device (plan/what_if.h), so "fits" means the run's true peak, not an estimate.
//
// Search: probe 1, 2, 4, ... until a value does not fit (or the cap is reached), then binary
// search between the last value that fitted and the first that did not. Peak memory grows with
// batch and sequence length, so the answer is the boundary: `value` fits and `value + 1` does not
// (or `value` is the cap). About 2*log2(answer) dry runs; each takes milliseconds even for a 70B
// shape, because meta skips every kernel.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "plan/dry_run.h"
#include "train/training_args.h"

namespace snug {

enum class FitDimension { batch, seq_len };

struct FitSearchResult {
  int64_t value = 0;       // largest value that fits; 0 when even 1 does not
  int64_t peak_bytes = 0;  // dry-run peak at `value` (at 1 when value is 0)
  bool capped = false;     // `value` is the cap (n_positions for seq_len), nothing above tried
  int64_t above = 0;       // value + 1 (absent when capped)
  int64_t above_peak = 0;  // dry-run peak at `above`
  int64_t dry_runs = 0;    // probes made
};

// The search itself, over any dry run: `peak_at(v)` is the peak at value v >= 1 (called at most
// once per value). Largest v in [1, cap] with peak_at(v) + overhead <= capacity.
using PeakAt = std::function<int64_t(int64_t)>;
FitSearchResult find_max_fit(const PeakAt& peak_at, int64_t capacity, int64_t overhead,
                             int64_t cap);

// Largest per-device batch (or seq_len) of a training run whose dry-run peak plus `overhead` (the
// runtime's own footprint, e.g. the CUDA context of a GPU preset) is at most `capacity`, every
// other argument as in `args`. `cap`: the largest value worth trying (seq_len: the model's
// n_positions). Each probe is a dry run with `data` (plan/dry_run.h; none: full rows). plan
// --inference searches its generation's dry runs (plan/inference_plan.h).
FitSearchResult find_max_fit(const TrainingArguments& args, FitDimension dim, int64_t capacity,
                             int64_t overhead, int64_t cap, const DryRunData& data = {});

// `args` with the dimension set to `value`.
TrainingArguments with_fit_value(const TrainingArguments& args, FitDimension dim, int64_t value);

}  // namespace snug

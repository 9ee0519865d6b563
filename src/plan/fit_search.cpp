#include "plan/fit_search.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "plan/dry_run.h"

namespace snug {

TrainingArguments with_fit_value(const TrainingArguments& args, FitDimension dim, int64_t value) {
  TrainingArguments a = args;
  if (dim == FitDimension::batch)
    a.per_device_train_batch_size = value;
  else
    a.seq_len = value;
  return a;
}

FitSearchResult find_max_fit(const TrainingArguments& args, FitDimension dim, int64_t capacity,
                             int64_t overhead, int64_t cap, const DryRunData& data) {
  return find_max_fit(
      [&](int64_t v) { return dry_run(with_fit_value(args, dim, v), data).peak_total; }, capacity,
      overhead, cap);
}

FitSearchResult find_max_fit(const PeakAt& peak_at, int64_t capacity, int64_t overhead,
                             int64_t cap) {
  SNUG_CHECK(cap >= 1, "find_max_fit: cap must be >= 1, got ", cap);
  std::map<int64_t, int64_t> peaks;  // value -> dry-run peak, each probed once
  auto peak = [&](int64_t v) {
    auto it = peaks.find(v);
    if (it != peaks.end()) return it->second;
    const int64_t p = peak_at(v);
    peaks.emplace(v, p);
    return p;
  };
  auto fits = [&](int64_t v) { return peak(v) + overhead <= capacity; };

  FitSearchResult r;
  if (!fits(1)) {
    r.value = 0;
    r.peak_bytes = peak(1);
    r.above = 1;
    r.above_peak = r.peak_bytes;
  } else {
    // Invariant: lo fits; hi does not (or hi is cap + 1, past what may be tried).
    int64_t lo = 1, hi = 0;
    while (hi == 0) {
      const int64_t next = std::min(lo * 2, cap);
      if (next == lo) {
        hi = cap + 1;
      } else if (fits(next)) {
        lo = next;
      } else {
        hi = next;
      }
    }
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (fits(mid))
        lo = mid;
      else
        hi = mid;
    }
    r.value = lo;
    r.peak_bytes = peak(lo);
    r.capped = lo == cap;
    if (!r.capped) {
      r.above = lo + 1;
      r.above_peak = peak(lo + 1);
    }
  }
  r.dry_runs = static_cast<int64_t>(peaks.size());
  return r;
}

}  // namespace snug

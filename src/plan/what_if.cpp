#include "plan/what_if.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>

#include "core/error.h"
#include "io/text_width.h"
#include "plan/switches.h"

namespace snug {

std::vector<WhatIf> what_if(const TrainingArguments& args, const DryRunData& data) {
  // One dry run per switch of plan/switches.h that is off in `args` and would apply.
  const int64_t batch = args.per_device_train_batch_size * args.gradient_accumulation_steps;
  std::vector<std::pair<std::string, TrainingArguments>> variants;
  for (const SwitchGroup& g : switch_groups())
    for (const Switch& s : g.choices(args, batch))
      if (s.what_if && s.what_if(args)) {
        TrainingArguments a = args;
        s.apply(a);
        variants.emplace_back(s.flags, a);
      }

  std::vector<WhatIf> rows;
  for (const auto& [flags, a] : variants) {
    try {
      // A combination this run's other flags rule out (e.g. an optimizer that refuses them), or
      // that a real run refuses for a feature not built yet: not an alternative, so not a row.
      const DryRun d = replay(a, data);
      if (d.unbuilt.empty()) rows.push_back({flags, d.memory.peak_total});
    } catch (const OutOfMemoryError&) {
      throw;
    } catch (const Error&) {
    }
  }
  return rows;
}

std::string what_if_table(const std::vector<WhatIf>& rows, int64_t baseline_peak) {
  // The flags column is as wide as its longest row (at least 62), so the figures stay aligned
  // when a row names several flags (the 4-bit base's three).
  size_t width = 62;
  for (const WhatIf& w : rows) width = std::max(width, w.flags.size());
  std::ostringstream os;
  char buf[64];
  std::snprintf(buf, sizeof buf, " %12s %12s\n", "peak MiB", "saves MiB");
  os << pad_to_width("what if you add", width) << buf;
  for (const WhatIf& w : rows) {
    std::snprintf(buf, sizeof buf, " %12.1f %12.1f\n", mib(w.peak_bytes),
                  mib(baseline_peak - w.peak_bytes));
    os << pad_to_width(w.flags, width) << buf;
  }
  return os.str();
}

nlohmann::json what_if_json(const std::vector<WhatIf>& rows, int64_t baseline_peak) {
  nlohmann::json j = nlohmann::json::array();
  for (const WhatIf& w : rows)
    j.push_back({{"flags", w.flags},
                 {"peak_bytes", w.peak_bytes},
                 {"saves_bytes", baseline_peak - w.peak_bytes}});
  return j;
}

}  // namespace snug

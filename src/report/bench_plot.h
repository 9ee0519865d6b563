// `snug bench seeds --plot`: peak memory per benchmark row as an SVG stacked bar chart, written
// as text. One bar per row, split by category at the global peak (bottom to top in the report's
// category order, only the categories some row uses), its total in MiB above it; a row that did
// not run shows "n/a"; an out-of-memory row is an outlined red bar of the bytes it needs, labelled
// OOM; the capacity is a dashed line when it is within twice the tallest bar. A legend names the
// categories, top first, as the bars stack. Every bar's tooltip is its name and configuration.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/memory.h"

namespace snug {

// What the chart needs of one row (cli/seeds.h's BenchRow).
struct PeakBar {
  std::string name;
  std::string description;  // the configuration, in the tooltip
  bool available = false;   // false: not run, "n/a"
  bool out_of_memory = false;
  int64_t need_bytes = 0;  // out_of_memory: the peak the row needs
  std::string note;        // out_of_memory: the tooltip's text
  MemoryStats memory;
};

// The categories (indices, core/memory.h's order) non-zero in some available bar, at the peak or
// at their own maximum.
std::vector<int> used_categories(const std::vector<PeakBar>& bars);

// The chart; `capacity` is the device memory the rows ran under, if any.
std::string peak_memory_svg(const std::vector<PeakBar>& bars, std::optional<int64_t> capacity,
                            const std::string& title);

}  // namespace snug

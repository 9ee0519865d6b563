// `snug plot-memory`: live device memory over one optimizer step of a memory timeline
// (report/memory_timeline.h), stacked by category, as an SVG written as text: one filled band per
// category (bottom to top in the report's category order), the phases of the step (forward,
// backward, optimizer) as shaded spans, the peak as a dashed line, a legend with each category's
// bytes at the step's peak, and labelled axes. The x axis is the order of allocations and frees
// (what the pool saw; on meta there is no meaningful time), the y axis live bytes.
//
// Steps with more events than the plot is pixels wide are drawn one column per pixel, each
// column showing the moment of its highest total, so the peak is never lost.
#pragma once

#include <cstdint>
#include <string>

#include "report/memory_timeline.h"

namespace snug {

struct MemoryPlotOptions {
  int64_t step = -1;  // -1: the last step in the timeline
  std::string title;  // empty: "live memory by category, step N"
};

// Throws snug::Error when the timeline has no events of the chosen step, naming t.source and the
// first 8 steps it has (and their count, when there are more).
std::string memory_timeline_svg(const Timeline& t, const MemoryPlotOptions& opts);

}  // namespace snug

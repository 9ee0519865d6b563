// What snug's SVG charts, written as text, share: `snug plot-memory`'s timeline
// (report/memory_plot.h), `snug quantize`'s comparison (report/quant_compare.h) and `snug bench
// seeds`' memory bars (report/bench_plot.h). One escaping rule for text and attribute values, and
// one opening element (sans-serif 12, a viewBox equal to the size, so the chart scales when
// embedded).
#pragma once

#include <string>
#include <string_view>

namespace snug {

// `s` with & < > " as XML entities, safe in element text and in double-quoted attributes.
std::string xml_escape(std::string_view s);

// The opening <svg ...> element of a `width` x `height` chart, with its newline.
std::string svg_open(int width, int height);

}  // namespace snug

// Columns of plain-text tables (the plan's what-if rows, the estimate's ZeRO formulas, the seeds'
// table): a cell padded to a width counted in characters, not bytes, so that a UTF-8 cell (Ψ is
// two bytes, one column) keeps the figures after it in line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace snug {

// `text` followed by spaces up to `width` characters (UTF-8 code points); `text` itself when it
// is as wide or wider.
std::string pad_to_width(std::string_view text, size_t width);

}  // namespace snug

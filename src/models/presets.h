// A family's presets are a table of rows with a `name` and an `alias` ("" for none) and the
// family's own columns; these read any such table, so that no family repeats the loops.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace snug {

// (name, alias) of every row, in table order (Architecture::presets).
template <class P, size_t N>
std::vector<std::pair<std::string, std::string>> preset_names(const P (&table)[N]) {
  std::vector<std::pair<std::string, std::string>> v;
  for (const P& p : table) v.emplace_back(p.name, p.alias);
  return v;
}

// The row named `name`; throws "unknown <family> preset '<name>'".
template <class P, size_t N>
const P& find_preset(const P (&table)[N], const std::string& name, const char* family) {
  for (const P& p : table)
    if (name == p.name) return p;
  throw Error(detail::concat("unknown ", family, " preset '", name, "'"));
}

}  // namespace snug

// A model's parameters as raw bytes by name: what "bit for bit the same weights" compares.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/model.h"

namespace snug::test {

inline std::map<std::string, std::vector<uint8_t>> param_bytes(const Model& m) {
  std::map<std::string, std::vector<uint8_t>> out;
  for (const Parameter* p : m.parameters()) {
    const auto* b = static_cast<const uint8_t*>(p->value.raw());
    out[p->name] = std::vector<uint8_t>(b, b + p->value.nbytes());
  }
  return out;
}

// Whether two models hold the same parameters, bit for bit.
inline bool same_values(const Model& a, const Model& b) {
  return param_bytes(a) == param_bytes(b);
}

}  // namespace snug::test

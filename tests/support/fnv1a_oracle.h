// FNV-1a 64 as 16 hex digits, written independently of src/io/fnv1a.h: the tests that play a
// tool rewriting trainer_state.json consistently sign documents with it, so a change to snug's
// own checksum code cannot make them agree with it by accident.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace snug::test {

inline std::string hex_fnv1a64(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace snug::test

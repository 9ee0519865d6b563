#include "io/fnv1a.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace snug {

uint64_t fnv1a64(std::string_view bytes, uint64_t h) {
  for (const char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

uint64_t fnv1a64_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  SNUG_CHECK(in.good(), path, ": cannot open: ", std::strerror(errno));
  uint64_t h = 0xcbf29ce484222325ULL;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = fnv1a64(std::string_view(buf.data(), static_cast<size_t>(in.gcount())), h);
  }
  SNUG_CHECK(in.eof(), path, ": read failed");
  return h;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace snug

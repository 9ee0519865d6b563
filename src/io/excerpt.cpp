#include "io/excerpt.h"

namespace snug {

namespace {

bool continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

}  // namespace

std::string excerpt(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t cut = max;
  while (cut > 0 && continuation(s[cut])) --cut;
  return std::string(s.substr(0, cut)) + "... (" + std::to_string(s.size()) + " bytes)";
}

std::string excerpt_tail(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t from = s.size() - max;
  while (from < s.size() && continuation(s[from])) ++from;
  return "... (" + std::to_string(s.size()) + " bytes) " + std::string(s.substr(from));
}

}  // namespace snug

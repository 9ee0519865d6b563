#include "io/text_width.h"

namespace snug {

std::string pad_to_width(std::string_view text, size_t width) {
  size_t chars = 0;
  for (const char c : text) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  std::string s(text);
  if (chars < width) s.append(width - chars, ' ');
  return s;
}

}  // namespace snug

#include "data/tokenizers/byte_level.h"

#include <array>

namespace snug::tok {

namespace {

struct Tables {
  std::array<std::string, 256> to_char;  // byte -> UTF-8 of its character
  std::array<int16_t, 0x144> to_byte;    // code point (< U+0144) -> byte, or -1
};

bool printable(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

std::string utf8(uint32_t cp) {  // cp < 0x800
  std::string s;
  if (cp < 0x80) {
    s.push_back(static_cast<char>(cp));
  } else {
    s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return s;
}

const Tables& tables() {
  static const Tables t = [] {
    Tables r;
    r.to_byte.fill(-1);
    uint32_t n = 0;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : 0x100 + n++;
      r.to_char[static_cast<size_t>(b)] = utf8(cp);
      r.to_byte[cp] = static_cast<int16_t>(b);
    }
    return r;
  }();
  return t;
}

}  // namespace

void bytes_to_byte_level(std::string_view bytes, std::string& out) {
  const Tables& t = tables();
  for (const char c : bytes) out += t.to_char[static_cast<uint8_t>(c)];
}

bool byte_level_to_bytes(std::string_view token, std::string& out) {
  const Tables& t = tables();
  std::string bytes;
  for (size_t i = 0; i < token.size();) {
    const auto c0 = static_cast<uint8_t>(token[i]);
    uint32_t cp = 0x10000;  // outside the table unless decoded below
    size_t len = 1;
    if (c0 < 0x80) {
      cp = c0;
    } else if ((c0 & 0xE0) == 0xC0 && i + 1 < token.size()) {
      cp = (static_cast<uint32_t>(c0 & 0x1F) << 6) | (static_cast<uint8_t>(token[i + 1]) & 0x3F);
      len = 2;
    }
    if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) {
      out.append(token);
      return false;
    }
    bytes.push_back(static_cast<char>(t.to_byte[cp]));
    i += len;
  }
  out += bytes;
  return true;
}

}  // namespace snug::tok

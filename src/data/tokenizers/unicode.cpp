#include "data/tokenizers/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "io/excerpt.h"

namespace snug::tok {

namespace {

// Length of the well-formed UTF-8 sequence at s[i], or 0 with `maximal` set to the length of the
// maximal prefix of one (at least 1) when it is ill-formed (Unicode 3.9, table 3-7).
size_t sequence_at(std::string_view s, size_t i, size_t& maximal) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
  const uint8_t c = b(0);
  maximal = 1;
  if (c < 0x80) return 1;
  size_t need = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    need = 1;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 2;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 3;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return 0;
    const uint8_t x = b(k);
    const uint8_t l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (x < l || x > h) return 0;
    maximal = k + 1;
  }
  return need + 1;
}

}  // namespace

void check_utf8(std::string_view text, const std::string& what) {
  for (size_t i = 0; i < text.size();) {
    size_t maximal = 0;
    const size_t n = sequence_at(text, i, maximal);
    SNUG_CHECK(n > 0, what, ": not valid UTF-8 at byte ", i);
    i += n;
  }
}

namespace {

std::string utf8proc_form(std::string_view text, int option, const char* name) {
  if (text.empty()) return {};
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                          static_cast<utf8proc_ssize_t>(text.size()), &out,
                                          static_cast<utf8proc_option_t>(UTF8PROC_STABLE | option));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> hold(out, &std::free);
  SNUG_CHECK(n >= 0, name, " normalization failed: ", utf8proc_errmsg(n));
  return std::string(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
}

}  // namespace

std::string nfc(std::string_view text) {
  return utf8proc_form(text, UTF8PROC_COMPOSE, "NFC");
}
std::string nfd(std::string_view text) {
  return utf8proc_form(text, UTF8PROC_DECOMPOSE, "NFD");
}

std::u32string code_points(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  for (size_t i = 0; i < text.size();) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n =
        utf8proc_iterate(p + i, static_cast<utf8proc_ssize_t>(text.size() - i), &cp);
    SNUG_ASSERT(n > 0, "code_points: not valid UTF-8");
    out.push_back(static_cast<char32_t>(cp));
    i += static_cast<size_t>(n);
  }
  return out;
}

void append_utf8(char32_t cp, std::string& out) {
  utf8proc_uint8_t buf[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(cp), buf);
  out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(n));
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    size_t maximal = 0;
    const size_t n = sequence_at(bytes, i, maximal);
    if (n > 0) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += maximal;
    }
  }
  return out;
}

std::string shorten(std::string_view s) {
  return excerpt(s);
}

}  // namespace snug::tok

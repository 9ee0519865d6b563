#include "data/tokenizers/bert.h"

#include <utf8proc.h>

#include "data/tokenizers/unicode.h"

namespace snug::tok {

namespace {

utf8proc_category_t category(char32_t c) {
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

bool is_whitespace(char32_t c) {
  if ((c >= 0x09 && c <= 0x0D) || c == 0x85) return true;
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_ZS || k == UTF8PROC_CATEGORY_ZL || k == UTF8PROC_CATEGORY_ZP;
}

bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CO;
}

bool is_punctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
           (c >= 0x7B && c <= 0x7E);
  const auto k = category(c);
  return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

// BERT's "Chinese character" blocks (tokenizers normalizers/bert.rs is_chinese_char).
bool is_chinese(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

}  // namespace

std::string bert_normalize(std::string_view text, const BertNormalizerOptions& o) {
  std::string s;
  s.reserve(text.size());
  for (const char32_t c : code_points(text)) {
    if (o.clean_text) {
      if (c == 0 || c == 0xFFFD || is_control(c)) continue;
      if (is_whitespace(c)) {
        s += ' ';
        continue;
      }
    }
    if (o.handle_chinese_chars && is_chinese(c)) {
      s += ' ';
      append_utf8(c, s);
      s += ' ';
      continue;
    }
    append_utf8(c, s);
  }
  if (o.strip_accents) {
    std::string kept;
    for (const char32_t c : code_points(nfd(s)))
      if (category(c) != UTF8PROC_CATEGORY_MN) append_utf8(c, kept);
    s = std::move(kept);
  }
  if (o.lowercase) {
    std::string lower;
    lower.reserve(s.size());
    for (const char32_t c : code_points(s)) {
      if (c == 0x130) {  // the one unconditional multi-character lowercase (SpecialCasing)
        lower += "i\xCC\x87";
        continue;
      }
      append_utf8(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))), lower);
    }
    s = std::move(lower);
  }
  return s;
}

void bert_pre_tokenize(std::string_view text, std::vector<std::string>& out) {
  std::string word;
  const auto flush = [&] {
    if (!word.empty()) out.push_back(std::move(word));
    word.clear();
  };
  for (const char32_t c : code_points(text)) {
    if (is_whitespace(c)) {
      flush();
    } else if (is_punctuation(c)) {
      flush();
      append_utf8(c, word);
      flush();
    } else {
      append_utf8(c, word);
    }
  }
  flush();
}

}  // namespace snug::tok

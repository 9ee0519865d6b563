#include "data/tokenizers/wordpiece.h"

#include <optional>

#include "data/tokenizers/unicode.h"

namespace snug::tok {

WordPieceModel::WordPieceModel(const Fields& f) : vocab_(f) {
  f.only({"type", "unk_token", "continuing_subword_prefix", "max_input_chars_per_word", "vocab"});
  const std::string unk = f.string("unk_token");
  const auto id = vocab_.id_of(unk);
  // tokenizers fails at encode time (MissingUnkToken); snug refuses the file up front.
  SNUG_CHECK(id, f.what(), ": ", f.at("unk_token"), " '", shorten(unk), "' is not in model.vocab");
  unk_id_ = *id;
  prefix_ = f.string("continuing_subword_prefix");
  max_chars_ = f.integer("max_input_chars_per_word", int64_t{1} << 40);
}

void WordPieceModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  int64_t chars = 0;
  for (const char c : word) chars += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  if (chars > max_chars_) {
    out.push_back(unk_id_);
    return;
  }
  const size_t mark = out.size();
  std::string candidate;
  for (size_t start = 0; start < word.size();) {
    size_t end = word.size();
    std::optional<int32_t> found;
    while (start < end) {
      const std::string_view part = word.substr(start, end - start);
      if (start == 0) {
        found = vocab_.id_of(part);
      } else {
        candidate.assign(prefix_).append(part);
        found = vocab_.id_of(candidate);
      }
      if (found) break;
      // Drop the last character of the part and try again.
      do --end;
      while (end > start && (static_cast<uint8_t>(word[end]) & 0xC0) == 0x80);
    }
    if (!found) {
      out.resize(mark);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(*found);
    start = end;
  }
}

}  // namespace snug::tok

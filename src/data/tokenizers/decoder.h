// The decoder of a tokenizer.json: steps that turn the token strings of ids back into text, each
// taking and giving a list of strings (tokenizers' decode_chain), joined at the end. Implemented:
// ByteLevel (alphabet back to bytes, lossy UTF-8), WordPiece ("##" joins, a space otherwise,
// optional clean-up of spaces before punctuation), Metaspace, and SentencePiece's chain:
// Replace (String pattern), ByteFallback (<0xNN> runs back to UTF-8, one U+FFFD per byte of an
// ill-formed run), Fuse (one string), Strip (n leading/trailing copies of a character); and a
// Sequence. None (null): the tokens joined with spaces, as tokenizers does.
#pragma once

#include <string>
#include <vector>

#include "data/tokenizers/json_fields.h"

namespace snug::tok {

class Decoder {
 public:
  Decoder() = default;  // none
  // `f`: the "decoder" object (errors name the field).
  explicit Decoder(const Fields& f) : none_(false) { parse(f); }

  std::string decode(std::vector<std::string> tokens) const;

 private:
  enum class Kind { kByteLevel, kWordPiece, kMetaspace, kReplace, kByteFallback, kFuse, kStrip };
  struct Step {
    Kind kind;
    std::string text, content;   // WordPiece: prefix; Metaspace: replacement; Replace; Strip
    bool flag = false;           // WordPiece: cleanup; Metaspace: prepend (scheme not never)
    size_t start = 0, stop = 0;  // Strip
  };
  void parse(const Fields& f);
  bool none_ = true;
  std::vector<Step> steps_;
};

}  // namespace snug::tok

// The normalizer of a tokenizer.json: a list of steps applied in order to every piece of text
// that is not an added token (and to the content of added tokens with normalized=true).
// Implemented: NFC, BertNormalizer, Prepend (SentencePiece's "▁" before a non-empty piece),
// Replace with a String pattern (" " -> "▁"), and a Sequence of these.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "data/tokenizers/bert.h"
#include "data/tokenizers/json_fields.h"

namespace snug::tok {

class Normalizer {
 public:
  Normalizer() = default;  // none: the identity
  // `f`: the "normalizer" object (errors name the field).
  explicit Normalizer(const Fields& f) { parse(f); }

  // `text`: valid UTF-8.
  std::string apply(std::string_view text) const;

 private:
  enum class Kind { kNfc, kBert, kPrepend, kReplace };
  struct Step {
    Kind kind;
    BertNormalizerOptions bert;
    std::string text, content;  // Prepend: text; Replace: text -> content
  };
  void parse(const Fields& f);
  std::vector<Step> steps_;
};

}  // namespace snug::tok

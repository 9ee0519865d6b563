// The pre-tokenizer of a tokenizer.json: steps that cut a normalized piece of text into the
// words the model encodes one by one. Implemented: ByteLevel (GPT-2 regex split and the byte
// alphabet), Split (regex or string), BertPreTokenizer (whitespace and punctuation), Metaspace
// (SentencePiece's "▁" for spaces, prepended always or on the first piece), and a Sequence.
// None (null): the piece is one word.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/tokenizers/json_fields.h"
#include "data/tokenizers/regex_split.h"

namespace snug::tok {

// Metaspace's prepend_scheme ("always", "first" or "never") as tokenizers reads it, shared with
// the Metaspace decoder: "always" when absent; the legacy add_prefix_space=false must come with
// "never" (tokenizers refuses the file otherwise).
std::string metaspace_prepend_scheme(const Fields& f);

class PreTokenizer {
 public:
  PreTokenizer() = default;  // none
  // `f`: the "pre_tokenizer" object (errors name the field).
  explicit PreTokenizer(const Fields& f) { parse(f, true); }

  // Appends the words of `piece` to `out`. `first`: the piece starts the input text (not after
  // an added token), which Metaspace's prepend_scheme "first" asks.
  void split(std::string piece, bool first, std::vector<std::string>& out) const;

 private:
  enum class Kind { kByteLevel, kSplit, kBert, kMetaspace };
  enum class Prepend { kAlways, kFirst, kNever };
  struct Step {
    Kind kind;
    std::shared_ptr<const SplitPattern> pattern;  // Split; Metaspace: the replacement
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false, use_regex = true;  // ByteLevel
    std::string replacement;                          // Metaspace
    Prepend prepend = Prepend::kAlways;
    bool split = true;
  };
  void parse(const Fields& f, bool top);
  std::vector<Step> steps_;
};

}  // namespace snug::tok

// BERT's text clean-up and splitting (tokenizers' normalizers/bert.rs and pre_tokenizers/bert.rs),
// with the character classes taken from utf8proc's Unicode data rather than hand-written tables:
//   whitespace  = Rust char::is_whitespace: categories Zs, Zl, Zp and U+0009-000D, U+0085;
//   control     = categories Cc, Cf, Co, except \t \n \r (which count as whitespace);
//   punctuation = categories Pc Pd Ps Pe Pi Pf Po, or ASCII punctuation (which adds $ + < = > ^
//                 ` | ~, symbols in Unicode);
//   accent      = category Mn after NFD.
// tokenizers takes these classes from an older Unicode version than utf8proc's (lowercase from a
// newer one): the code points assigned or re-categorized since (149 control/punctuation, 421
// accents, 55 lowercase, found by enumerating every code point through both;
// docs/tokenizers.md) are classed by utf8proc's data here. The CJK ranges are BERT's own
// definition (the CJK Unified Ideographs blocks it lists), not a Unicode property.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace snug::tok {

struct BertNormalizerOptions {
  bool clean_text = true;            // drop U+0000, U+FFFD and controls; whitespace -> ' '
  bool handle_chinese_chars = true;  // a space on each side of every CJK ideograph
  bool strip_accents = true;         // NFD, then drop nonspacing marks (left in NFD)
  bool lowercase = true;             // per code point (U+0130 'İ' -> "i̇" as Rust's)
};

// `text`: valid UTF-8.
std::string bert_normalize(std::string_view text, const BertNormalizerOptions& options);

// BertPreTokenizer: split on whitespace (dropped), then every punctuation character is a piece
// of its own. Appends the non-empty pieces to `out`.
void bert_pre_tokenize(std::string_view text, std::vector<std::string>& out);

}  // namespace snug::tok

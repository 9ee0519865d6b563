// Splitting a piece of text on the matches of a pattern, the way tokenizers' Split
// pre-tokenizer does (normalizer.rs split + pattern.rs): the matches of a leftmost-first,
// non-overlapping scan and the text between them become spans, which a SplitBehavior then
// keeps, drops or joins. Regexes run on PCRE2 (Debian libpcre2-dev) with UTF and UCP, so that
// \p{L}, \p{N}, Unicode \s, (?i:...) and (?!\S) of the GPT-2 / Llama 3 / Qwen2 patterns mean
// what they mean to Oniguruma in tokenizers.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace snug::tok {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// A compiled pattern. Errors (a pattern PCRE2 refuses) are snug::Error starting with `what`.
class SplitPattern {
 public:
  // `literal`: the pattern is a plain string (tokenizers' {"String": s}), not a regex.
  SplitPattern(const std::string& pattern, bool literal, const std::string& what);
  ~SplitPattern();
  SplitPattern(const SplitPattern&) = delete;
  SplitPattern& operator=(const SplitPattern&) = delete;

  // Appends the non-empty pieces of `text` (valid UTF-8) to `out`.
  void split(std::string_view text, SplitBehavior behavior, bool invert,
             std::vector<std::string>& out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace snug::tok

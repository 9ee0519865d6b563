#define PCRE2_CODE_UNIT_WIDTH 8
#include "data/tokenizers/regex_split.h"

#include <pcre2.h>

#include <algorithm>

#include "core/error.h"

namespace snug::tok {

struct SplitPattern::Impl {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  std::string what;
};

SplitPattern::SplitPattern(const std::string& pattern, bool literal, const std::string& what)
    : impl_(std::make_unique<Impl>()) {
  impl_->what = what;
  int err = 0;
  PCRE2_SIZE offset = 0;
  // (PCRE2 allows no UCP with LITERAL; a literal has no classes for it to change.)
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                              &err, &offset, nullptr);
  if (impl_->code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error(detail::concat(what, ": pattern refused by PCRE2 at offset ", offset, ": ",
                               reinterpret_cast<const char*>(msg)));
  }
  // A hostile pattern cannot backtrack forever: past the limit the match is an error. split()
  // sets the match limit of each call (see kMatchSteps there).
  impl_->context = pcre2_match_context_create(nullptr);
  SNUG_ASSERT(impl_->context != nullptr, "pcre2_match_context_create failed");
  pcre2_set_depth_limit(impl_->context, 100'000);
  // The JIT is an optimisation only; without it (no JIT on this CPU) matching still works.
  (void)pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);
}

SplitPattern::~SplitPattern() {
  if (impl_ && impl_->code) pcre2_code_free(impl_->code);
  if (impl_ && impl_->context) pcre2_match_context_free(impl_->context);
}

namespace {

struct Span {
  size_t begin, end;
  bool match;
};

// tokenizers' SplitDelimiterBehavior applied to the (non-match, match) spans.
std::vector<Span> apply_behavior(std::vector<Span> spans, SplitBehavior behavior) {
  if (behavior == SplitBehavior::kIsolated) return spans;
  std::vector<Span> acc;
  acc.reserve(spans.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
    case SplitBehavior::kIsolated:
      for (const Span& s : spans)
        if (!s.match || behavior == SplitBehavior::kIsolated) acc.push_back(s);
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Span& s : spans) {
        if (s.match && !previous_match && !acc.empty())
          acc.back().end = s.end;
        else
          acc.push_back(s);
        previous_match = s.match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->match && !previous_match && !acc.empty())
          acc.back().begin = it->begin;
        else
          acc.push_back(*it);
        previous_match = it->match;
      }
      std::reverse(acc.begin(), acc.end());
      break;
    case SplitBehavior::kContiguous:
      for (const Span& s : spans) {
        if (s.match == previous_match && !acc.empty())
          acc.back().end = s.end;
        else
          acc.push_back(s);
        previous_match = s.match;
      }
      break;
  }
  return acc;
}

// The work bound of a split, in PCRE2's match-limit steps. The limit PCRE2 applies is per call,
// and a pattern such as (a|aa)*c|a stays under any per-call limit while doing it at each of
// thousands of start positions (minutes on a 66 KB text; issue 29). So the whole text has a
// budget, linear in its length: each call starts with a small limit, doubled while PCRE2 reports
// it exhausted, and every limit tried is charged. A call that matches costs at most twice what
// it needed (and at least kFirstLimit), so no real pattern (tens of steps a match) comes near.
constexpr uint64_t kFirstLimit = 256;
constexpr uint64_t kCallLimit = 10'000'000;   // one call, as PCRE2's own default
constexpr uint64_t kBudgetBase = 10'000'000;  // a text's budget: this,
constexpr uint64_t kBudgetPerByte = 2'000;    // plus this per byte
size_t utf8_char_len(uint8_t c) {
  if (c < 0x80) return 1;
  if (c < 0xE0) return 2;
  if (c < 0xF0) return 3;
  return 4;
}

}  // namespace

void SplitPattern::split(std::string_view text, SplitBehavior behavior, bool invert,
                         std::vector<std::string>& out) const {
  if (text.empty()) return;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(impl_->code, nullptr), &pcre2_match_data_free);
  SNUG_ASSERT(md != nullptr, "pcre2_match_data_create_from_pattern failed");
  // A context of this call's own: the limit changes per call, and split() may run on several
  // threads at once.
  std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> context(
      pcre2_match_context_copy(impl_->context), &pcre2_match_context_free);
  SNUG_ASSERT(context != nullptr, "pcre2_match_context_copy failed");
  const uint64_t budget = kBudgetBase + kBudgetPerByte * static_cast<uint64_t>(text.size());
  uint64_t spent = 0;
  auto match_from = [&](size_t at) {
    for (uint64_t limit = kFirstLimit;; limit *= 2) {
      limit = std::min({limit, kCallLimit, budget - spent});
      pcre2_set_match_limit(context.get(), static_cast<uint32_t>(limit));
      const int rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()),
                                 text.size(), at, PCRE2_NO_UTF_CHECK, md.get(), context.get());
      spent += limit;
      if (rc != PCRE2_ERROR_MATCHLIMIT) return rc;
      SNUG_CHECK(spent < budget && limit < kCallLimit, impl_->what,
                 ": the pattern backtracks too much: more than ",
                 limit < kCallLimit ? budget : kCallLimit, " regex steps ",
                 limit < kCallLimit ? "splitting " : "for one match in ", "a text of ", text.size(),
                 " bytes (catastrophic backtracking, e.g. (a|aa)*c)");
    }
  };
  std::vector<Span> spans;
  size_t prev = 0, at = 0;
  while (at <= text.size()) {
    const int rc = match_from(at);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Error(detail::concat(impl_->what, ": regex match failed at byte ", at, " of a text of ",
                                 text.size(), " bytes: ", reinterpret_cast<const char*>(msg),
                                 " (PCRE2 error ", rc, ")"));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t start = ov[0], end = ov[1];
    if (prev != start) spans.push_back({prev, start, false});
    spans.push_back({start, end, true});
    prev = end;
    // After an empty match the scan moves on by one character.
    at = end > start
             ? end
             : end + (end < text.size() ? utf8_char_len(static_cast<uint8_t>(text[end])) : 1);
  }
  if (prev != text.size()) spans.push_back({prev, text.size(), false});
  if (invert)
    for (Span& s : spans) s.match = !s.match;
  for (const Span& s : apply_behavior(std::move(spans), behavior))
    if (s.end > s.begin) out.emplace_back(text.substr(s.begin, s.end - s.begin));
}

}  // namespace snug::tok

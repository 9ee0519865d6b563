#include "data/tokenizers/pre_tokenizer.h"

#include <array>

#include "data/tokenizers/bert.h"
#include "data/tokenizers/byte_level.h"
#include "data/tokenizers/unicode.h"

namespace snug::tok {

namespace {

// The GPT-2 pattern that ByteLevel(use_regex=true) splits with (tokenizers byte_level.rs).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

const SplitPattern& byte_level_pattern() {
  static const SplitPattern p(kGpt2Pattern, false, "the GPT-2 byte-level pattern");
  return p;
}

SplitBehavior parse_behavior(const Fields& f) {
  const std::string b = f.string("behavior");
  static const std::array<std::pair<const char*, SplitBehavior>, 5> names{{
      {"Removed", SplitBehavior::kRemoved},
      {"Isolated", SplitBehavior::kIsolated},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext},
      {"Contiguous", SplitBehavior::kContiguous},
  }};
  for (const auto& [n, v] : names)
    if (b == n) return v;
  f.refuse("behavior", "unknown split behavior '" + shorten(b) + "'");
}

}  // namespace

std::string metaspace_prepend_scheme(const Fields& f) {
  const std::string scheme = f.is_null("prepend_scheme") ? "always" : f.string("prepend_scheme");
  if (scheme != "always" && scheme != "first" && scheme != "never")
    f.refuse("prepend_scheme", "expected always, first or never");
  if (!f.boolean("add_prefix_space", true) && scheme != "never")
    f.refuse("add_prefix_space", "false does not match prepend_scheme '" + scheme + "'");
  return scheme;
}

void PreTokenizer::parse(const Fields& f, bool top) {
  const std::string type = f.string("type");
  Step p{};
  if (type == "Sequence" && top) {
    f.only({"type", "pretokenizers"});
    const auto& list = f.array("pretokenizers");
    for (size_t i = 0; i < list.size(); ++i)
      parse(Fields(list[i], f.item("pretokenizers", i), f.what()), false);
    return;
  } else if (type == "ByteLevel") {
    f.only({"type", "add_prefix_space", "trim_offsets", "use_regex"});
    (void)f.required_bool("trim_offsets");  // offsets only; snug gives no offsets
    p.kind = Kind::kByteLevel;
    p.add_prefix_space = f.required_bool("add_prefix_space");
    p.use_regex = f.boolean("use_regex", true);
  } else if (type == "Split") {
    f.only({"type", "pattern", "behavior", "invert"});
    const Fields pat(f.get("pattern"), f.at("pattern"), f.what());
    p.kind = Kind::kSplit;
    if (pat.has("Regex") && !pat.has("String")) {
      pat.only({"Regex"});
      p.pattern = std::make_shared<SplitPattern>(pat.string("Regex"), false,
                                                 f.what() + ": " + pat.at("Regex"));
    } else {
      pat.only({"String"});
      p.pattern = std::make_shared<SplitPattern>(pat.string("String"), true,
                                                 f.what() + ": " + pat.at("String"));
    }
    p.behavior = parse_behavior(f);
    p.invert = f.required_bool("invert");
  } else if (type == "BertPreTokenizer") {
    f.only({"type"});
    p.kind = Kind::kBert;
  } else if (type == "Metaspace") {
    f.only({"type", "replacement", "prepend_scheme", "split", "add_prefix_space"});
    p.kind = Kind::kMetaspace;
    p.replacement = f.string("replacement");
    SNUG_CHECK(code_points(p.replacement).size() == 1, f.what(), ": ", f.at("replacement"),
               ": expected one character");
    p.pattern = std::make_shared<SplitPattern>(p.replacement, true, f.what());
    const std::string scheme = metaspace_prepend_scheme(f);
    p.prepend = scheme == "always"  ? Prepend::kAlways
                : scheme == "first" ? Prepend::kFirst
                                    : Prepend::kNever;
    p.split = f.boolean("split", true);
  } else {
    f.refuse("type", "pre-tokenizer '" + shorten(type) +
                         "' not supported by snug (ByteLevel, Split, BertPreTokenizer, "
                         "Metaspace, Sequence)");
  }
  steps_.push_back(std::move(p));
}

void PreTokenizer::split(std::string piece, bool first, std::vector<std::string>& out) const {
  std::vector<std::string> words{std::move(piece)}, next;
  for (const Step& st : steps_) {
    next.clear();
    for (size_t i = 0; i < words.size(); ++i) {
      std::string& s = words[i];
      switch (st.kind) {
        case Kind::kSplit:
          st.pattern->split(s, st.behavior, st.invert, next);
          break;
        case Kind::kBert:
          bert_pre_tokenize(s, next);
          break;
        case Kind::kByteLevel: {
          if (st.add_prefix_space && s[0] != ' ') s.insert(s.begin(), ' ');
          std::vector<std::string> parts;
          if (st.use_regex)
            byte_level_pattern().split(s, SplitBehavior::kIsolated, false, parts);
          else
            parts.push_back(std::move(s));
          for (const std::string& w : parts) {
            std::string mapped;
            bytes_to_byte_level(w, mapped);
            next.push_back(std::move(mapped));
          }
          break;
        }
        case Kind::kMetaspace: {
          std::string r;
          for (size_t at = 0, done = 0;; done = at + 1) {
            at = s.find(' ', done);
            r.append(s, done, at == std::string::npos ? std::string::npos : at - done);
            if (at == std::string::npos) break;
            r += st.replacement;
          }
          const bool prepend =
              st.prepend == Prepend::kAlways || (st.prepend == Prepend::kFirst && first && i == 0);
          if (prepend && r.compare(0, st.replacement.size(), st.replacement) != 0)
            r.insert(0, st.replacement);
          if (st.split)
            st.pattern->split(r, SplitBehavior::kMergedWithNext, false, next);
          else
            next.push_back(std::move(r));
          break;
        }
      }
    }
    std::swap(words, next);
  }
  for (std::string& w : words)
    if (!w.empty()) out.push_back(std::move(w));
}

}  // namespace snug::tok

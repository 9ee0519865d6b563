#include "data/tokenizers/decoder.h"

#include <optional>

#include "data/tokenizers/byte_level.h"
#include "data/tokenizers/pre_tokenizer.h"
#include "data/tokenizers/unicode.h"

namespace snug::tok {

namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  std::string out;
  size_t done = 0;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, done)) {
    out.append(s, done, at - done).append(to);
    done = at + from.size();
  }
  s = out.append(s, done, std::string::npos);
}

// tokenizers' WordPiece decoder clean-up, in its order.
void cleanup(std::string& s) {
  static constexpr std::pair<const char*, const char*> kRules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) replace_all(s, from, to);
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The byte of a "<0xNN>" token: six bytes, NN as Rust's u8::from_str_radix(NN, 16) reads it
// (either case, or '+' then one digit).
std::optional<uint8_t> fallback_byte(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return std::nullopt;
  const int hi = hex_digit(t[3]), lo = hex_digit(t[4]);
  if (t[3] == '+' && lo >= 0) return static_cast<uint8_t>(lo);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<uint8_t>(hi * 16 + lo);
}

void byte_fallback(std::vector<std::string>& tokens) {
  std::vector<std::string> out;
  std::string run;
  const auto flush = [&] {
    if (run.empty()) return;
    if (utf8_lossy(run) == run) {
      out.push_back(run);
    } else {
      for (size_t i = 0; i < run.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
    }
    run.clear();
  };
  for (std::string& t : tokens) {
    if (const auto b = fallback_byte(t)) {
      run += static_cast<char>(*b);
      continue;
    }
    flush();
    out.push_back(std::move(t));
  }
  flush();
  tokens = std::move(out);
}

}  // namespace

void Decoder::parse(const Fields& f) {
  const std::string type = f.string("type");
  Step s{};
  if (type == "Sequence") {
    f.only({"type", "decoders"});
    const auto& list = f.array("decoders");
    for (size_t i = 0; i < list.size(); ++i)
      parse(Fields(list[i], f.item("decoders", i), f.what()));
    return;
  } else if (type == "ByteLevel") {
    // The fields change offsets only; checked, as tokenizers requires them.
    f.only({"type", "add_prefix_space", "trim_offsets", "use_regex"});
    (void)f.required_bool("add_prefix_space");
    (void)f.required_bool("trim_offsets");
    (void)f.boolean("use_regex", true);
    s.kind = Kind::kByteLevel;
  } else if (type == "WordPiece") {
    f.only({"type", "prefix", "cleanup"});
    s.kind = Kind::kWordPiece;
    s.text = f.string("prefix");
    s.flag = f.required_bool("cleanup");
  } else if (type == "Metaspace") {
    f.only({"type", "replacement", "prepend_scheme", "split", "add_prefix_space"});
    s.kind = Kind::kMetaspace;
    s.text = f.string("replacement");
    SNUG_CHECK(code_points(s.text).size() == 1, f.what(), ": ", f.at("replacement"),
               ": expected one character");
    s.flag = metaspace_prepend_scheme(f) != "never";
    (void)f.boolean("split", true);  // pre-tokenizing only
  } else if (type == "Replace") {
    f.only({"type", "pattern", "content"});
    const Fields p(f.get("pattern"), f.at("pattern"), f.what());
    if (p.has("Regex")) p.refuse("Regex", "a Replace regex is not supported by snug (String)");
    p.only({"String"});
    s.kind = Kind::kReplace;
    s.text = p.string("String");
    SNUG_CHECK(!s.text.empty(), f.what(), ": ", p.at("String"), ": empty");
    s.content = f.string("content");
  } else if (type == "ByteFallback") {
    f.only({"type"});
    s.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    f.only({"type"});
    s.kind = Kind::kFuse;
  } else if (type == "Strip") {
    f.only({"type", "content", "start", "stop"});
    s.kind = Kind::kStrip;
    s.content = f.string("content");
    SNUG_CHECK(code_points(s.content).size() == 1, f.what(), ": ", f.at("content"),
               ": expected one character");
    s.start = static_cast<size_t>(f.integer("start", int64_t{1} << 20));
    s.stop = static_cast<size_t>(f.integer("stop", int64_t{1} << 20));
  } else {
    f.refuse("type", "decoder '" + shorten(type) +
                         "' not supported by snug (ByteLevel, WordPiece, Metaspace, Replace, "
                         "ByteFallback, Fuse, Strip, Sequence)");
  }
  steps_.push_back(std::move(s));
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (none_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out.append(i ? " " : "").append(tokens[i]);
    return out;
  }
  for (const Step& st : steps_) {
    switch (st.kind) {
      case Kind::kByteLevel: {
        std::string bytes;
        for (const std::string& t : tokens) byte_level_to_bytes(t, bytes);
        tokens.assign(1, utf8_lossy(bytes));
        break;
      }
      case Kind::kWordPiece:
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string& t = tokens[i];
          if (i != 0) {
            if (t.compare(0, st.text.size(), st.text) == 0)
              t.erase(0, st.text.size());
            else
              t.insert(0, " ");
          }
          if (st.flag) cleanup(t);
        }
        break;
      case Kind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i)
          replace_all(tokens[i], st.text, i == 0 && st.flag ? "" : " ");
        break;
      case Kind::kReplace:
        for (std::string& t : tokens) replace_all(t, st.text, st.content);
        break;
      case Kind::kByteFallback:
        byte_fallback(tokens);
        break;
      case Kind::kFuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case Kind::kStrip:
        for (std::string& t : tokens) {
          // Up to `start` leading and `stop` trailing copies of the character.
          const std::u32string cps = code_points(t);
          const char32_t c = code_points(st.content)[0];
          size_t a = 0, b = cps.size();
          while (a < st.start && a < b && cps[a] == c) ++a;
          size_t cut = 0;
          while (cut < st.stop && b > a && cps[b - 1] == c) --b, ++cut;
          std::string kept;
          for (size_t k = a; k < b; ++k) append_utf8(cps[k], kept);
          t = std::move(kept);
        }
        break;
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace snug::tok

#include "data/tokenizer_json.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <optional>
#include <utility>

#include "core/error.h"
#include "data/tokenizers/bpe.h"
#include "data/tokenizers/byte_level.h"
#include "data/tokenizers/regex_split.h"
#include "data/tokenizers/unicode.h"
#include "io/json_input.h"

namespace snug {

namespace {

using nlohmann::json;

// The GPT-2 pattern that ByteLevel(use_regex=true) splits with (tokenizers byte_level.rs).
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

const tok::SplitPattern& byte_level_pattern() {
  static const tok::SplitPattern p(kGpt2Pattern, false, "the GPT-2 byte-level pattern");
  return p;
}

// Field access that names the field in every refusal.
class Fields {
 public:
  Fields(const json& j, std::string where, const std::string& what)
      : j_(j), where_(std::move(where)), what_(what) {
    SNUG_CHECK(j_.is_object(), what_, ": ", where_, ": expected an object");
  }
  // Refuses any key not in `known`: a field snug does not implement is never ignored.
  void only(std::initializer_list<const char*> known) const {
    for (const auto& item : j_.items()) {
      const std::string& k = item.key();  // (clang 14 cannot capture a structured binding)
      const bool ok =
          std::any_of(known.begin(), known.end(), [&](const char* n) { return k == n; });
      SNUG_CHECK(ok, what_, ": ", at(k), ": field not supported by snug (see docs/tokenizers.md)");
    }
  }
  bool has(const char* k) const { return j_.contains(k); }
  bool is_null(const char* k) const { return !j_.contains(k) || j_.at(k).is_null(); }
  const json& get(const char* k) const {
    SNUG_CHECK(j_.contains(k), what_, ": ", at(k), ": missing");
    return j_.at(k);
  }
  bool boolean(const char* k, bool fallback) const {
    if (is_null(k)) return fallback;
    SNUG_CHECK(j_.at(k).is_boolean(), what_, ": ", at(k), ": expected true or false");
    return j_.at(k).get<bool>();
  }
  // A field tokenizers also requires: snug does not guess a default for what it would refuse.
  bool required_bool(const char* k) const {
    const json& v = get(k);
    SNUG_CHECK(v.is_boolean(), what_, ": ", at(k), ": expected true or false");
    return v.get<bool>();
  }
  std::string string(const char* k) const {
    const json& v = get(k);
    SNUG_CHECK(v.is_string(), what_, ": ", at(k), ": expected a string");
    return v.get<std::string>();
  }
  std::optional<std::string> optional_string(const char* k) const {
    if (is_null(k)) return std::nullopt;
    return string(k);
  }
  std::string at(const std::string& k) const { return where_.empty() ? k : where_ + "." + k; }
  [[noreturn]] void refuse(const std::string& k, const std::string& why) const {
    throw Error(detail::concat(what_, ": ", at(k), ": ", why));
  }

 private:
  const json& j_;
  std::string where_;
  const std::string& what_;
};

tok::SplitBehavior parse_behavior(const Fields& f) {
  const std::string b = f.string("behavior");
  static const std::array<std::pair<const char*, tok::SplitBehavior>, 5> names{{
      {"Removed", tok::SplitBehavior::kRemoved},
      {"Isolated", tok::SplitBehavior::kIsolated},
      {"MergedWithPrevious", tok::SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", tok::SplitBehavior::kMergedWithNext},
      {"Contiguous", tok::SplitBehavior::kContiguous},
  }};
  for (const auto& [n, v] : names)
    if (b == n) return v;
  f.refuse("behavior", "unknown split behavior '" + tok::shorten(b) + "'");
}

}  // namespace

struct JsonTokenizer::Impl {
  struct PreTokenizer {
    bool byte_level = false;
    // Split
    std::unique_ptr<tok::SplitPattern> pattern;
    tok::SplitBehavior behavior = tok::SplitBehavior::kIsolated;
    bool invert = false;
    // ByteLevel
    bool add_prefix_space = true;
    bool use_regex = true;
  };
  struct Added {
    std::string content;  // normalized when `normalized`
    int32_t id;
  };
  struct Piece {
    std::string text;
    int32_t id;  // an added token's id, or -1 for text still to tokenize
  };

  std::string what;
  bool nfc = false;
  std::vector<PreTokenizer> pre;
  std::unique_ptr<tok::BpeModel> model;
  std::vector<Added> raw_added, normalized_added;  // longest first
  std::vector<std::string> added_tokens;           // ids model->size() and up
  std::vector<bool> special;                       // by id

  void parse_pre_tokenizer(const json& j, const std::string& where, bool top);
  void split_added(std::vector<Piece>& pieces, const std::vector<Added>& set) const;
};

void JsonTokenizer::Impl::parse_pre_tokenizer(const json& j, const std::string& where, bool top) {
  const Fields f(j, where, what);
  const std::string type = f.string("type");
  if (type == "Sequence" && top) {
    f.only({"type", "pretokenizers"});
    const json& list = f.get("pretokenizers");
    SNUG_CHECK(list.is_array(), what, ": ", f.at("pretokenizers"), ": expected an array");
    for (size_t i = 0; i < list.size(); ++i)
      parse_pre_tokenizer(list[i], detail::concat(f.at("pretokenizers"), "[", i, "]"), false);
  } else if (type == "ByteLevel") {
    f.only({"type", "add_prefix_space", "trim_offsets", "use_regex"});
    (void)f.required_bool("trim_offsets");  // offsets only; snug gives no offsets
    PreTokenizer p;
    p.byte_level = true;
    p.add_prefix_space = f.required_bool("add_prefix_space");
    p.use_regex = f.boolean("use_regex", true);
    pre.push_back(std::move(p));
  } else if (type == "Split") {
    f.only({"type", "pattern", "behavior", "invert"});
    const Fields pat(f.get("pattern"), f.at("pattern"), what);
    PreTokenizer p;
    if (pat.has("Regex") && !pat.has("String")) {
      pat.only({"Regex"});
      p.pattern = std::make_unique<tok::SplitPattern>(pat.string("Regex"), false,
                                                      what + ": " + pat.at("Regex"));
    } else {
      pat.only({"String"});
      p.pattern = std::make_unique<tok::SplitPattern>(pat.string("String"), true,
                                                      what + ": " + pat.at("String"));
    }
    p.behavior = parse_behavior(f);
    p.invert = f.required_bool("invert");
    pre.push_back(std::move(p));
  } else {
    f.refuse("type", "pre-tokenizer '" + tok::shorten(type) +
                         "' not supported by snug (byte-level BPE: ByteLevel, Split, Sequence)");
  }
}

// Cuts every occurrence of the tokens of `set` (leftmost first, then longest, as tokenizers'
// LeftmostLongest automaton) out of the pieces that are still text.
void JsonTokenizer::Impl::split_added(std::vector<Piece>& pieces,
                                      const std::vector<Added>& set) const {
  if (set.empty()) return;
  std::array<bool, 256> first{};
  for (const Added& a : set) first[static_cast<uint8_t>(a.content[0])] = true;
  std::vector<Piece> out;
  for (Piece& p : pieces) {
    if (p.id >= 0) {
      out.push_back(std::move(p));
      continue;
    }
    const std::string_view s = p.text;
    size_t done = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (!first[static_cast<uint8_t>(s[i])]) continue;
      for (const Added& a : set) {
        if (s.compare(i, a.content.size(), a.content) != 0) continue;
        if (i > done) out.push_back({std::string(s.substr(done, i - done)), -1});
        out.push_back({a.content, a.id});
        done = i + a.content.size();
        i = done - 1;
        break;
      }
    }
    if (done < s.size()) out.push_back({std::string(s.substr(done)), -1});
  }
  pieces = std::move(out);
}

JsonTokenizer::JsonTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
JsonTokenizer::JsonTokenizer(JsonTokenizer&&) noexcept = default;
JsonTokenizer& JsonTokenizer::operator=(JsonTokenizer&&) noexcept = default;
JsonTokenizer::~JsonTokenizer() = default;

JsonTokenizer JsonTokenizer::load(const std::string& path) {
  const std::string what = "tokenizer '" + path + "'";
  return parse(read_input_file(path, what, int64_t{1} << 30), what);
}

JsonTokenizer JsonTokenizer::parse(std::string_view text, const std::string& what) {
  auto impl = std::make_unique<Impl>();
  impl->what = what;
  const json doc = parse_json_input(text, what);
  const Fields top(doc, "", what);
  top.only({"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
            "model", "post_processor", "decoder"});
  if (!top.is_null("version")) (void)top.string("version");
  if (!top.is_null("truncation")) top.refuse("truncation", "not supported by snug (must be null)");
  if (!top.is_null("padding")) top.refuse("padding", "not supported by snug (must be null)");

  // Normalizer: none or NFC.
  if (!top.is_null("normalizer")) {
    const Fields f(top.get("normalizer"), "normalizer", what);
    const std::string type = f.string("type");
    if (type != "NFC")
      f.refuse("type", "normalizer '" + tok::shorten(type) + "' not supported by snug (NFC)");
    f.only({"type"});
    impl->nfc = true;
  }

  // Pre-tokenizer: Splits, then ByteLevel last (the byte-level BPE layout).
  if (top.is_null("pre_tokenizer"))
    top.refuse("pre_tokenizer", "missing: snug reads byte-level BPE (a ByteLevel pre-tokenizer)");
  impl->parse_pre_tokenizer(top.get("pre_tokenizer"), "pre_tokenizer", true);
  for (size_t i = 0; i < impl->pre.size(); ++i)
    SNUG_CHECK(impl->pre[i].byte_level == (i + 1 == impl->pre.size()), what,
               ": pre_tokenizer: snug reads byte-level BPE, whose pre-tokenizers are Splits "
               "followed by one ByteLevel last");

  // Model: BPE.
  const Fields m(top.get("model"), "model", what);
  const std::string type = m.string("type");
  if (type != "BPE")
    m.refuse("type", "model '" + tok::shorten(type) + "' not supported by snug (byte-level BPE)");
  m.only({"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
          "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"});
  if (!m.is_null("dropout")) m.refuse("dropout", "BPE dropout (training only) not supported");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.optional_string(k).value_or("") != "")
      m.refuse(k, "not supported by snug (must be null)");
  if (m.boolean("byte_fallback", false))
    m.refuse("byte_fallback", "not supported by snug for byte-level BPE (must be false)");
  const json& vocab_json = m.get("vocab");
  SNUG_CHECK(vocab_json.is_object(), what, ": model.vocab: expected an object");
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(vocab_json.size());
  for (const auto& [token, id] : vocab_json.items()) {
    SNUG_CHECK(
        id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < int64_t{1} << 30,
        what, ": model.vocab['", tok::shorten(token), "']: expected an id in [0, 2^30)");
    vocab.emplace(token, static_cast<int32_t>(id.get<int64_t>()));
  }
  const json& merges_json = m.get("merges");
  SNUG_CHECK(merges_json.is_array(), what, ": model.merges: expected an array");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(merges_json.size());
  for (size_t i = 0; i < merges_json.size(); ++i) {
    const json& e = merges_json[i];
    const bool legacy = e.is_string();
    SNUG_CHECK(legacy == merges_json[0].is_string(), what, ": model.merges[", i,
               "]: mixes \"a b\" strings and [a, b] pairs");
    if (legacy) {
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      SNUG_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos, what,
                 ": model.merges[", i, "]: expected \"left right\" (one space)");
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else {
      SNUG_CHECK(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string(), what,
                 ": model.merges[", i, "]: expected \"left right\" or [left, right]");
      merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    }
  }
  tok::BpeOptions options;
  options.fuse_unk = m.boolean("fuse_unk", false);
  options.ignore_merges = m.boolean("ignore_merges", false);
  const std::optional<std::string> unk = m.optional_string("unk_token");
  const size_t vocab_n = vocab.size();
  const auto unk_it = unk ? vocab.find(*unk) : vocab.end();
  if (unk) {
    SNUG_CHECK(unk_it != vocab.end(), what, ": model.unk_token '", tok::shorten(*unk),
               "' is not in model.vocab");
    options.unk_id = unk_it->second;
  }
  impl->model = std::make_unique<tok::BpeModel>(std::move(vocab), merges, options, what);
  impl->special.assign(vocab_n, false);

  // Added tokens: ids as tokenizers assigns them (the model's id for a token in the vocabulary,
  // else the next free id after it); a file that says otherwise is refused, not trusted.
  if (!top.is_null("added_tokens")) {
    const json& list = top.get("added_tokens");
    SNUG_CHECK(list.is_array(), what, ": added_tokens: expected an array");
    int64_t max_added = -1;
    for (size_t i = 0; i < list.size(); ++i) {
      const Fields a(list[i], detail::concat("added_tokens[", i, "]"), what);
      a.only({"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
      for (const char* k : {"single_word", "lstrip", "rstrip"})
        if (a.required_bool(k)) a.refuse(k, "not supported by snug (must be false)");
      const std::string content = a.string("content");
      SNUG_CHECK(!content.empty(), what, ": ", a.at("content"), ": empty");
      const json& idj = a.get("id");
      SNUG_CHECK(idj.is_number_integer(), what, ": ", a.at("id"), ": expected an integer");
      const bool special = a.required_bool("special");
      const bool normalized = a.required_bool("normalized");
      const auto in_vocab = impl->model->id_of(content);
      const int64_t n = impl->model->size();
      const int64_t expected = in_vocab ? *in_vocab : (max_added >= n ? max_added + 1 : n);
      SNUG_CHECK(idj.get<int64_t>() == expected, what, ": ", a.at("id"), ": ", idj.get<int64_t>(),
                 " for '", tok::shorten(content), "', but tokenizers gives it id ", expected);
      for (const auto* set : {&impl->raw_added, &impl->normalized_added})
        for (const Impl::Added& other : *set)
          SNUG_CHECK(other.id != expected, what, ": ", a.at("content"), ": '",
                     tok::shorten(content), "' is listed twice");
      max_added = std::max(max_added, expected);
      if (!in_vocab) {
        impl->added_tokens.push_back(content);
        impl->special.push_back(special);
      } else if (special) {
        impl->special[static_cast<size_t>(expected)] = true;
      }
      const auto id = static_cast<int32_t>(expected);
      if (normalized)
        impl->normalized_added.push_back({impl->nfc ? tok::nfc(content) : content, id});
      else
        impl->raw_added.push_back({content, id});
    }
    for (auto* set : {&impl->raw_added, &impl->normalized_added}) {
      std::erase_if(*set, [](const Impl::Added& x) { return x.content.empty(); });
      std::stable_sort(set->begin(), set->end(), [](const auto& x, const auto& y) {
        return x.content.size() > y.content.size();
      });
    }
  }

  // Post-processor: none or ByteLevel (offsets only). Decoder: ByteLevel.
  if (!top.is_null("post_processor")) {
    const Fields f(top.get("post_processor"), "post_processor", what);
    const std::string t = f.string("type");
    if (t != "ByteLevel")
      f.refuse("type", "post-processor '" + tok::shorten(t) +
                           "' not supported by snug (ByteLevel or null)");
    f.only({"type", "add_prefix_space", "trim_offsets", "use_regex"});
    (void)f.required_bool("add_prefix_space");
    (void)f.required_bool("trim_offsets");
    (void)f.boolean("use_regex", true);
  }
  if (top.is_null("decoder")) top.refuse("decoder", "missing: snug decodes byte-level BPE");
  const Fields d(top.get("decoder"), "decoder", what);
  const std::string dt = d.string("type");
  if (dt != "ByteLevel")
    d.refuse("type", "decoder '" + tok::shorten(dt) + "' not supported by snug (ByteLevel)");
  d.only({"type", "add_prefix_space", "trim_offsets", "use_regex"});
  // The ByteLevel decoder's fields change offsets only; checked, as tokenizers requires them.
  (void)d.required_bool("add_prefix_space");
  (void)d.required_bool("trim_offsets");
  (void)d.boolean("use_regex", true);
  return JsonTokenizer(std::move(impl));
}

std::string JsonTokenizer::normalize(std::string_view text) const {
  tok::check_utf8(text, impl_->what + ": text to encode");
  return impl_->nfc ? tok::nfc(text) : std::string(text);
}

std::vector<int32_t> JsonTokenizer::encode(std::string_view text) const {
  const Impl& t = *impl_;
  tok::check_utf8(text, t.what + ": text to encode");
  std::vector<Impl::Piece> pieces{{std::string(text), -1}};
  t.split_added(pieces, t.raw_added);
  if (t.nfc)
    for (Impl::Piece& p : pieces)
      if (p.id < 0) p.text = tok::nfc(p.text);
  t.split_added(pieces, t.normalized_added);

  std::vector<std::string> split, next;
  std::vector<int32_t> ids;
  for (Impl::Piece& p : pieces) {
    if (p.id >= 0) {
      ids.push_back(p.id);
      continue;
    }
    if (p.text.empty()) continue;
    split.assign(1, std::move(p.text));
    for (const Impl::PreTokenizer& pt : t.pre) {
      next.clear();
      for (std::string& s : split) {
        if (!pt.byte_level) {
          pt.pattern->split(s, pt.behavior, pt.invert, next);
          continue;
        }
        if (pt.add_prefix_space && s[0] != ' ') s.insert(s.begin(), ' ');
        std::vector<std::string> words;
        if (pt.use_regex)
          byte_level_pattern().split(s, tok::SplitBehavior::kIsolated, false, words);
        else
          words.push_back(std::move(s));
        for (const std::string& w : words) {
          std::string mapped;
          tok::bytes_to_byte_level(w, mapped);
          next.push_back(std::move(mapped));
        }
      }
      std::swap(split, next);
    }
    for (const std::string& w : split) t.model->encode_word(w, ids);
  }
  return ids;
}

std::string JsonTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    SNUG_CHECK(id >= 0 && id < vocab_size(), impl_->what, ": decode: id ", id, " at position ", i,
               " is outside [0, ", vocab_size(), ")");
    if (skip_special && impl_->special[static_cast<size_t>(id)]) continue;
    tok::byte_level_to_bytes(token(id), bytes);
  }
  return tok::utf8_lossy(bytes);
}

int64_t JsonTokenizer::vocab_size() const {
  return impl_->model->size() + static_cast<int64_t>(impl_->added_tokens.size());
}

const std::string& JsonTokenizer::token(int32_t id) const {
  SNUG_CHECK(id >= 0 && id < vocab_size(), impl_->what, ": id ", id, " is outside [0, ",
             vocab_size(), ")");
  if (id < impl_->model->size()) return impl_->model->token_of(id);
  return impl_->added_tokens[static_cast<size_t>(id - impl_->model->size())];
}

}  // namespace snug

namespace snug {

std::optional<int32_t> JsonTokenizer::token_to_id(std::string_view token) const {
  if (const auto id = impl_->model->id_of(token)) return id;
  const auto& added = impl_->added_tokens;
  for (size_t i = 0; i < added.size(); ++i)
    if (added[i] == token)
      return static_cast<int32_t>(impl_->model->size() + static_cast<int64_t>(i));
  return std::nullopt;
}

}  // namespace snug

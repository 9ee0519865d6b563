#include "data/tokenizer_json.h"

#include <algorithm>
#include <array>
#include <utility>

#include "core/error.h"
#include "data/tokenizers/decoder.h"
#include "data/tokenizers/json_fields.h"
#include "data/tokenizers/normalizer.h"
#include "data/tokenizers/post_processor.h"
#include "data/tokenizers/pre_tokenizer.h"
#include "data/tokenizers/unicode.h"
#include "data/tokenizers/vocab.h"
#include "io/json_input.h"

namespace snug {

using nlohmann::json;
using tok::Fields;

struct JsonTokenizer::Impl {
  struct Added {
    std::string content;  // normalized when `normalized`
    int32_t id;
  };
  struct Piece {
    std::string text;
    int32_t id;  // an added token's id, or -1 for text still to tokenize
  };

  std::string what;
  tok::Normalizer normalizer;
  tok::PreTokenizer pre;
  std::unique_ptr<tok::Model> model;
  tok::PostProcessor post;
  tok::Decoder decoder;
  std::vector<Added> raw_added, normalized_added;  // longest first
  std::vector<std::string> added_tokens;           // ids model->size() and up
  std::vector<bool> special;                       // by id

  int64_t model_size() const { return model->vocab().size(); }
  void parse_added(const Fields& top);
  void split_added(std::vector<Piece>& pieces, const std::vector<Added>& set) const;
};

// Added tokens: ids as tokenizers assigns them (the model's id for a token in the vocabulary,
// else the next free id after it); a file that says otherwise is refused, not trusted.
void JsonTokenizer::Impl::parse_added(const Fields& top) {
  special.assign(static_cast<size_t>(model_size()), false);
  if (top.is_null("added_tokens")) return;
  const json& list = top.array("added_tokens");
  int64_t max_added = -1;
  for (size_t i = 0; i < list.size(); ++i) {
    const Fields a(list[i], top.item("added_tokens", i), what);
    a.only({"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
    for (const char* k : {"single_word", "lstrip", "rstrip"})
      if (a.required_bool(k)) a.refuse(k, "not supported by snug (must be false)");
    const std::string content = a.string("content");
    SNUG_CHECK(!content.empty(), what, ": ", a.at("content"), ": empty");
    const json& idj = a.get("id");
    SNUG_CHECK(idj.is_number_integer(), what, ": ", a.at("id"), ": expected an integer");
    const bool is_special = a.required_bool("special");
    const bool normalized = a.required_bool("normalized");
    const auto in_vocab = model->vocab().id_of(content);
    const int64_t n = model_size();
    const int64_t expected = in_vocab ? *in_vocab : (max_added >= n ? max_added + 1 : n);
    SNUG_CHECK(idj.get<int64_t>() == expected, what, ": ", a.at("id"), ": ", idj.get<int64_t>(),
               " for '", tok::shorten(content), "', but tokenizers gives it id ", expected);
    for (const auto* set : {&raw_added, &normalized_added})
      for (const Added& other : *set)
        SNUG_CHECK(other.id != expected, what, ": ", a.at("content"), ": '", tok::shorten(content),
                   "' is listed twice");
    max_added = std::max(max_added, expected);
    if (!in_vocab) {
      added_tokens.push_back(content);
      special.push_back(is_special);
    } else if (is_special) {
      special[static_cast<size_t>(expected)] = true;
    }
    const auto id = static_cast<int32_t>(expected);
    if (normalized)
      normalized_added.push_back({normalizer.apply(content), id});
    else
      raw_added.push_back({content, id});
  }
  for (auto* set : {&raw_added, &normalized_added}) {
    std::erase_if(*set, [](const Added& x) { return x.content.empty(); });
    std::stable_sort(set->begin(), set->end(), [](const auto& x, const auto& y) {
      return x.content.size() > y.content.size();
    });
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
  JsonTokenizer t(std::make_unique<Impl>());
  Impl& m = *t.impl_;
  m.what = what;
  const json doc = parse_json_input(text, what);
  const Fields top(doc, "", m.what);
  top.only({"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
            "model", "post_processor", "decoder"});
  if (!top.is_null("version")) (void)top.string("version");
  // Truncation and padding settings (sentence-transformers folders carry both) are read, checked
  // and not applied: transformers' tokenizer(text) turns them off unless a call asks for them
  // (PreTrainedTokenizerFast.set_truncation_and_padding), and snug cuts and pads in the data
  // pipeline (--seq-len, the collator). So encode() equals tokenizers' encode with
  // no_truncation() and no_padding().
  if (!top.is_null("truncation"))
    Fields(top.get("truncation"), "truncation", m.what)
        .only({"direction", "max_length", "strategy", "stride"});
  if (!top.is_null("padding"))
    Fields(top.get("padding"), "padding", m.what)
        .only(
            {"strategy", "direction", "pad_to_multiple_of", "pad_id", "pad_type_id", "pad_token"});
  const auto part = [&](const char* key) { return Fields(top.get(key), key, m.what); };
  if (!top.is_null("normalizer")) m.normalizer = tok::Normalizer(part("normalizer"));
  if (!top.is_null("pre_tokenizer")) m.pre = tok::PreTokenizer(part("pre_tokenizer"));
  m.model = tok::parse_model(part("model"));
  m.parse_added(top);
  if (!top.is_null("post_processor"))
    m.post = tok::PostProcessor(part("post_processor"), t.vocab_size());
  if (!top.is_null("decoder")) m.decoder = tok::Decoder(part("decoder"));
  return t;
}

std::string JsonTokenizer::normalize(std::string_view text) const {
  tok::check_utf8(text, impl_->what + ": text to encode");
  return impl_->normalizer.apply(text);
}

std::vector<int32_t> JsonTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const Impl& t = *impl_;
  tok::check_utf8(text, t.what + ": text to encode");
  std::vector<Impl::Piece> pieces{{std::string(text), -1}};
  t.split_added(pieces, t.raw_added);
  const bool starts_with_text = !pieces.empty() && pieces[0].id < 0;
  for (Impl::Piece& p : pieces)
    if (p.id < 0) p.text = t.normalizer.apply(p.text);
  t.split_added(pieces, t.normalized_added);

  std::vector<int32_t> ids;
  if (add_special_tokens) ids = t.post.prefix();
  std::vector<std::string> words;
  for (size_t i = 0; i < pieces.size(); ++i) {
    Impl::Piece& p = pieces[i];
    if (p.id >= 0) {
      ids.push_back(p.id);
      continue;
    }
    if (p.text.empty()) continue;
    words.clear();
    t.pre.split(std::move(p.text), i == 0 && starts_with_text, words);
    for (const std::string& w : words) t.model->encode_word(w, ids);
  }
  if (add_special_tokens) ids.insert(ids.end(), t.post.suffix().begin(), t.post.suffix().end());
  return ids;
}

std::string JsonTokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    SNUG_CHECK(id >= 0 && id < vocab_size(), impl_->what, ": decode: id ", id, " at position ", i,
               " is outside [0, ", vocab_size(), ")");
    if (skip_special && impl_->special[static_cast<size_t>(id)]) continue;
    tokens.push_back(token(id));
  }
  return impl_->decoder.decode(std::move(tokens));
}

int64_t JsonTokenizer::vocab_size() const {
  return impl_->model_size() + static_cast<int64_t>(impl_->added_tokens.size());
}

const std::string& JsonTokenizer::token(int32_t id) const {
  SNUG_CHECK(id >= 0 && id < vocab_size(), impl_->what, ": id ", id, " is outside [0, ",
             vocab_size(), ")");
  if (id < impl_->model_size()) return impl_->model->vocab().token_of(id);
  return impl_->added_tokens[static_cast<size_t>(id - impl_->model_size())];
}

std::optional<int32_t> JsonTokenizer::token_to_id(std::string_view token) const {
  if (const auto id = impl_->model->vocab().id_of(token)) return id;
  const auto& added = impl_->added_tokens;
  for (size_t i = 0; i < added.size(); ++i)
    if (added[i] == token)
      return static_cast<int32_t>(impl_->model_size() + static_cast<int64_t>(i));
  return std::nullopt;
}

}  // namespace snug

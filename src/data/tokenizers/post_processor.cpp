#include "data/tokenizers/post_processor.h"

#include <map>
#include <string>

#include "data/tokenizers/unicode.h"

namespace snug::tok {

void PostProcessor::parse(const Fields& f, int64_t vocab_size, bool top) {
  const std::string type = f.string("type");
  if (type == "Sequence" && top) {
    f.only({"type", "processors"});
    const auto& list = f.array("processors");
    for (size_t i = 0; i < list.size(); ++i)
      parse(Fields(list[i], f.item("processors", i), f.what()), vocab_size, false);
  } else if (type == "ByteLevel") {
    f.only({"type", "add_prefix_space", "trim_offsets", "use_regex"});
    (void)f.required_bool("add_prefix_space");
    (void)f.required_bool("trim_offsets");
    (void)f.boolean("use_regex", true);
  } else if (type == "TemplateProcessing") {
    SNUG_CHECK(prefix_.empty() && suffix_.empty(), f.what(), ": ", f.where(),
               ": a second post-processor that adds tokens is not supported by snug");
    parse_template(f, vocab_size);
  } else if (type == "BertProcessing") {
    SNUG_CHECK(prefix_.empty() && suffix_.empty(), f.what(), ": ", f.where(),
               ": a second post-processor that adds tokens is not supported by snug");
    f.only({"type", "sep", "cls"});
    for (const char* k : {"cls", "sep"}) {
      const auto& v = f.get(k);
      SNUG_CHECK(v.is_array() && v.size() == 2 && v[0].is_string() && v[1].is_number_integer() &&
                     v[1].get<int64_t>() >= 0 && v[1].get<int64_t>() < vocab_size,
                 f.what(), ": ", f.at(k), ": expected [token, id] with an id below ", vocab_size);
      (k[0] == 'c' ? prefix_ : suffix_).push_back(static_cast<int32_t>(v[1].get<int64_t>()));
    }
  } else {
    f.refuse("type", "post-processor '" + shorten(type) +
                         "' not supported by snug (TemplateProcessing, BertProcessing, "
                         "ByteLevel, Sequence)");
  }
}

// {"single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A",
// "type_id": 0}}, ...], "pair": [...], "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [101],
// "tokens": ["[CLS]"]}}}
void PostProcessor::parse_template(const Fields& f, int64_t vocab_size) {
  f.only({"type", "single", "pair", "special_tokens"});
  const Fields specials(f.get("special_tokens"), f.at("special_tokens"), f.what());
  std::map<std::string, std::vector<int32_t>> ids_of;
  for (const auto& [name, value] : f.get("special_tokens").items()) {
    const Fields s(value, specials.at(shorten(name)), f.what());  // the key is the file's
    s.only({"id", "ids", "tokens"});
    SNUG_CHECK(s.string("id") == name, f.what(), ": ", s.at("id"), ": differs from its key");
    const auto& ids = s.array("ids");
    const auto& tokens = s.array("tokens");
    SNUG_CHECK(ids.size() == tokens.size(), f.what(), ": ", s.at("ids"),
               ": not as many ids as tokens");
    std::vector<int32_t>& out = ids_of[name];
    for (size_t i = 0; i < ids.size(); ++i) {
      SNUG_CHECK(ids[i].is_number_integer() && ids[i].get<int64_t>() >= 0 &&
                     ids[i].get<int64_t>() < vocab_size,
                 f.what(), ": ", s.item("ids", i), ": expected an id below ", vocab_size);
      SNUG_CHECK(tokens[i].is_string(), f.what(), ": ", s.item("tokens", i), ": expected a string");
      out.push_back(static_cast<int32_t>(ids[i].get<int64_t>()));
    }
  }
  // Each template: its pieces, and the sequences it names (in order).
  const auto read = [&](const char* key, const std::string& expected) {
    const auto& list = f.array(key);
    std::string sequences;
    std::vector<int32_t> before, after;
    for (size_t i = 0; i < list.size(); ++i) {
      const Fields piece(list[i], f.item(key, i), f.what());
      if (piece.has("Sequence")) {
        piece.only({"Sequence"});
        const Fields seq(piece.get("Sequence"), piece.at("Sequence"), f.what());
        seq.only({"id", "type_id"});
        const std::string id = seq.string("id");
        SNUG_CHECK(id == "A" || id == "B", f.what(), ": ", seq.at("id"), ": expected A or B");
        (void)seq.integer("type_id", 1 << 30);
        sequences += id;
        continue;
      }
      piece.only({"SpecialToken"});
      const Fields tok(piece.get("SpecialToken"), piece.at("SpecialToken"), f.what());
      tok.only({"id", "type_id"});
      (void)tok.integer("type_id", 1 << 30);
      const auto it = ids_of.find(tok.string("id"));
      SNUG_CHECK(it != ids_of.end(), f.what(), ": ", tok.at("id"), ": '", shorten(tok.string("id")),
                 "' is not in special_tokens");
      auto& side = sequences.empty() ? before : after;
      side.insert(side.end(), it->second.begin(), it->second.end());
    }
    SNUG_CHECK(sequences == expected, f.what(), ": ", f.at(key), ": expected the sequence",
               expected.size() > 1 ? "s " : " ", expected, " once each, in order");
    return std::pair{before, after};
  };
  std::tie(prefix_, suffix_) = read("single", "A");
  (void)read("pair", "AB");
}

}  // namespace snug::tok

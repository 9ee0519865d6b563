#include "data/tokenizers/normalizer.h"

#include "data/tokenizers/unicode.h"

namespace snug::tok {

void Normalizer::parse(const Fields& f) {
  const std::string type = f.string("type");
  if (type == "Sequence") {
    f.only({"type", "normalizers"});
    const auto& list = f.array("normalizers");
    for (size_t i = 0; i < list.size(); ++i)
      parse(Fields(list[i], f.item("normalizers", i), f.what()));
  } else if (type == "NFC") {
    f.only({"type"});
    steps_.push_back({Kind::kNfc, {}, {}, {}});
  } else if (type == "BertNormalizer") {
    f.only({"type", "clean_text", "handle_chinese_chars", "strip_accents", "lowercase"});
    BertNormalizerOptions o;
    o.clean_text = f.required_bool("clean_text");
    o.handle_chinese_chars = f.required_bool("handle_chinese_chars");
    o.lowercase = f.required_bool("lowercase");
    o.strip_accents = f.boolean("strip_accents", o.lowercase);  // null: follows lowercase
    steps_.push_back({Kind::kBert, o, {}, {}});
  } else if (type == "Prepend") {
    f.only({"type", "prepend"});
    steps_.push_back({Kind::kPrepend, {}, f.string("prepend"), {}});
  } else if (type == "Replace") {
    f.only({"type", "pattern", "content"});
    const Fields p(f.get("pattern"), f.at("pattern"), f.what());
    if (p.has("Regex")) p.refuse("Regex", "a Replace regex is not supported by snug (String)");
    p.only({"String"});
    std::string from = p.string("String");
    SNUG_CHECK(!from.empty(), f.what(), ": ", p.at("String"), ": empty");
    steps_.push_back({Kind::kReplace, {}, std::move(from), f.string("content")});
  } else {
    f.refuse("type", "normalizer '" + shorten(type) +
                         "' not supported by snug (NFC, BertNormalizer, Prepend, Replace, "
                         "Sequence)");
  }
}

std::string Normalizer::apply(std::string_view text) const {
  std::string s(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kNfc:
        s = nfc(s);
        break;
      case Kind::kBert:
        s = bert_normalize(s, step.bert);
        break;
      case Kind::kPrepend:
        if (!s.empty()) s.insert(0, step.text);
        break;
      case Kind::kReplace: {
        std::string out;
        size_t done = 0;
        for (size_t at = s.find(step.text); at != std::string::npos; at = s.find(step.text, done)) {
          out.append(s, done, at - done).append(step.content);
          done = at + step.text.size();
        }
        s = out.append(s, done, std::string::npos);
        break;
      }
    }
  }
  return s;
}

}  // namespace snug::tok

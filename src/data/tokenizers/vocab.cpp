#include "data/tokenizers/vocab.h"

#include "data/tokenizers/unicode.h"

namespace snug::tok {

Vocab::Vocab(const Fields& f) {
  const auto& v = f.get("vocab");
  SNUG_CHECK(v.is_object(), f.what(), ": ", f.at("vocab"), ": expected an object");
  ids_.reserve(v.size());
  tokens_.resize(v.size());
  std::vector<bool> seen(v.size(), false);
  for (const auto& [token, idj] : v.items()) {
    SNUG_CHECK(idj.is_number_integer() && idj.get<int64_t>() >= 0 &&
                   idj.get<int64_t>() < static_cast<int64_t>(v.size()),
               f.what(), ": ", f.at("vocab"), "['", shorten(token), "']: id ", shorten(idj.dump()),
               " is outside 0..", v.size() - 1, " (snug needs the ids 0..n-1, each once)");
    const auto id = static_cast<size_t>(idj.get<int64_t>());
    SNUG_CHECK(!seen[id], f.what(), ": ", f.at("vocab"), ": id ", id, " is given to two tokens");
    seen[id] = true;
    tokens_[id] = token;
    ids_.emplace(token, static_cast<int32_t>(id));
  }
}

}  // namespace snug::tok

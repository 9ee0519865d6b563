#include "data/tokenizers/wordpiece.h"

#include "data/tokenizers/unicode.h"

namespace snug::tok {

WordPieceModel::WordPieceModel(const Fields& f) : vocab_(f) {
  f.only({"type", "unk_token", "continuing_subword_prefix", "max_input_chars_per_word", "vocab"});
  const std::string unk = f.string("unk_token");
  const auto id = vocab_.id_of(unk);
  // tokenizers fails at encode time (MissingUnkToken); snug refuses the file up front.
  SNUG_CHECK(id, f.what(), ": ", f.at("unk_token"), " '", shorten(unk), "' is not in model.vocab");
  unk_id_ = *id;
  prefix_ = f.string("continuing_subword_prefix");
  max_chars_ = f.integer("max_input_chars_per_word", int64_t{1} << 40);
  for (int32_t token = 0; token < vocab_.size(); ++token) {
    const std::string& t = vocab_.token_of(token);
    first_.insert(t, token);
    if (!prefix_.empty() && t.size() > prefix_.size() && t.compare(0, prefix_.size(), prefix_) == 0)
      continuing_.insert(std::string_view(t).substr(prefix_.size()), token);
    if (prefix_.empty() && !t.empty()) continuing_.insert(t, token);
  }
}

void WordPieceModel::Trie::insert(std::string_view token, int32_t id) {
  uint32_t node = 0;
  for (const char c : token) {
    const uint64_t key = uint64_t{node} << 8 | static_cast<uint8_t>(c);
    const auto it = edges.find(key);
    if (it != edges.end()) {
      node = it->second;
      continue;
    }
    const auto next = static_cast<uint32_t>(ids.size());
    ids.push_back(-1);
    edges.emplace(key, next);
    node = next;
  }
  if (node != 0) ids[node] = id;
}

void WordPieceModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  int64_t chars = 0;
  for (const char c : word) chars += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  if (chars > max_chars_) {
    out.push_back(unk_id_);
    return;
  }
  const size_t mark = out.size();
  for (size_t start = 0; start < word.size();) {
    // The longest piece from `start` in the vocabulary that ends on a character boundary.
    const Trie& trie = start == 0 ? first_ : continuing_;
    size_t end = start;
    int32_t found = -1;
    uint32_t node = 0;
    for (size_t at = start; at < word.size(); ++at) {
      node = trie.child(node, static_cast<uint8_t>(word[at]));
      if (node == 0) break;
      const bool boundary =
          at + 1 == word.size() || (static_cast<uint8_t>(word[at + 1]) & 0xC0) != 0x80;
      if (boundary && trie.ids[node] >= 0) {
        found = trie.ids[node];
        end = at + 1;
      }
    }
    if (found < 0) {
      out.resize(mark);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(found);
    start = end;
  }
}

}  // namespace snug::tok

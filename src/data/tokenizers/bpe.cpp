#include "data/tokenizers/bpe.h"

#include <iterator>
#include <queue>

#include "core/error.h"
#include "data/tokenizers/unicode.h"

namespace snug::tok {

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges,
                   BpeOptions options, const std::string& what)
    : vocab_(std::make_move_iterator(vocab.begin()), std::make_move_iterator(vocab.end())),
      options_(options) {
  tokens_.resize(vocab_.size());
  std::vector<bool> seen(vocab_.size(), false);
  for (const auto& [token, id] : vocab_) {
    SNUG_CHECK(id >= 0 && static_cast<size_t>(id) < vocab_.size(), what, ": model.vocab: id ", id,
               " of '", shorten(token), "' is outside 0..", vocab_.size() - 1,
               " (snug needs the ids 0..n-1, each once)");
    SNUG_CHECK(!seen[static_cast<size_t>(id)], what, ": model.vocab: id ", id,
               " is given to two tokens");
    seen[static_cast<size_t>(id)] = true;
    tokens_[static_cast<size_t>(id)] = token;
  }
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const auto ia = id_of(a), ib = id_of(b), inew = id_of(a + b);
    SNUG_CHECK(ia && ib, what, ": model.merges[", rank, "]: '", shorten(ia ? b : a),
               "' is not in model.vocab");
    SNUG_CHECK(inew, what, ": model.merges[", rank, "]: the merged token '", shorten(a + b),
               "' is not in model.vocab");
    // A pair listed twice keeps its later rank, as tokenizers' HashMap collect does.
    merges_[key(*ia, *ib)] = Merge{static_cast<uint32_t>(rank), *inew};
  }
}

std::optional<int32_t> BpeModel::id_of(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (options_.ignore_merges) {
    if (const auto id = id_of(word)) {
      out.push_back(*id);
      return;
    }
  }
  if (word.size() >= kCacheMaxBytes) {
    merge_word(word, out);
    return;
  }
  {
    const std::lock_guard<std::mutex> lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  merge_word(word, ids);
  out.insert(out.end(), ids.begin(), ids.end());
  const std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() < kCacheEntries) cache_.emplace(std::string(word), std::move(ids));
}

namespace {

struct Symbol {
  int32_t id;
  int32_t prev, next;  // -1 at the ends
  bool alive;
};

struct Candidate {
  uint32_t rank;
  int32_t pos;
  int32_t new_id;
  // std::priority_queue pops the greatest: make that the lowest rank, then the leftmost.
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

size_t char_len(uint8_t c) {
  if (c < 0x80) return 1;
  if (c < 0xE0) return 2;
  if (c < 0xF0) return 3;
  return 4;
}

}  // namespace

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  bool last_unk = false;
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(char_len(static_cast<uint8_t>(word[i])), word.size() - i);
    const auto id = id_of(word.substr(i, n));
    i += n;
    if (id) {
      last_unk = false;
    } else {
      if (!options_.unk_id) continue;  // tokenizers drops it
      if (options_.fuse_unk && last_unk) continue;
      last_unk = true;
    }
    const auto pos = static_cast<int32_t>(sym.size());
    sym.push_back(Symbol{id ? *id : *options_.unk_id, pos - 1, pos + 1, true});
  }
  if (sym.empty()) return;
  sym.back().next = -1;

  std::priority_queue<Candidate> queue;
  const auto push_pair = [&](int32_t pos) {
    const Symbol& s = sym[static_cast<size_t>(pos)];
    if (s.next < 0) return;
    const auto it = merges_.find(key(s.id, sym[static_cast<size_t>(s.next)].id));
    if (it != merges_.end()) queue.push({it->second.rank, pos, it->second.new_id});
  };
  for (int32_t p = 0; p + 1 < static_cast<int32_t>(sym.size()); ++p) push_pair(p);

  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = sym[static_cast<size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[static_cast<size_t>(left.next)];
    // A stale entry: the pair there now does not merge into the same token.
    const auto it = merges_.find(key(left.id, right.id));
    if (it == merges_.end() || it->second.new_id != top.new_id) continue;
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[static_cast<size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  for (const Symbol& s : sym)
    if (s.alive) out.push_back(s.id);
}

}  // namespace snug::tok

#include "data/tokenizers/bpe.h"

#include <cstdio>
#include <iterator>
#include <queue>

#include "core/error.h"
#include "data/tokenizers/unicode.h"

namespace snug::tok {

namespace {

std::vector<std::pair<std::string, std::string>> read_merges(const Fields& f) {
  const auto& list = f.array("merges");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& e = list[i];
    const bool legacy = e.is_string();
    SNUG_CHECK(legacy == list[0].is_string(), f.what(), ": ", f.item("merges", i),
               ": mixes \"a b\" strings and [a, b] pairs");
    if (legacy) {
      const std::string s = e.get<std::string>();
      const size_t sp = s.find(' ');
      SNUG_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos, f.what(),
                 ": ", f.item("merges", i), ": expected \"left right\" (one space)");
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else {
      SNUG_CHECK(e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string(), f.what(),
                 ": ", f.item("merges", i), ": expected \"left right\" or [left, right]");
      merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
    }
  }
  return merges;
}

}  // namespace

BpeModel::BpeModel(const Fields& f) : vocab_(f) {
  f.only({"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
          "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"});
  if (!f.is_null("dropout")) f.refuse("dropout", "BPE dropout (training only) not supported");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (f.optional_string(k).value_or("") != "")
      f.refuse(k, "not supported by snug for BPE (must be null)");
  fuse_unk_ = f.boolean("fuse_unk", false);
  ignore_merges_ = f.boolean("ignore_merges", false);
  byte_fallback_ = f.boolean("byte_fallback", false);
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);  // tokenizers' format!("<{b:#04X}>")
    byte_ids_[static_cast<size_t>(b)] = vocab_.id_of(name).value_or(-1);
  }
  if (const auto unk = f.optional_string("unk_token")) {
    unk_id_ = vocab_.id_of(*unk);
    SNUG_CHECK(unk_id_, f.what(), ": ", f.at("unk_token"), " '", shorten(*unk),
               "' is not in model.vocab");
  }
  const auto merges = read_merges(f);
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const auto ia = vocab_.id_of(a), ib = vocab_.id_of(b), inew = vocab_.id_of(a + b);
    SNUG_CHECK(ia && ib, f.what(), ": ", f.item("merges", rank), ": '", shorten(ia ? b : a),
               "' is not in model.vocab");
    SNUG_CHECK(inew, f.what(), ": ", f.item("merges", rank), ": the merged token '", shorten(a + b),
               "' is not in model.vocab");
    // A pair listed twice keeps its later rank, as tokenizers' HashMap collect does.
    merges_[key(*ia, *ib)] = Merge{static_cast<uint32_t>(rank), *inew};
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (ignore_merges_) {
    if (const auto id = vocab_.id_of(word)) {
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
  const auto add = [&](int32_t id) {
    const auto pos = static_cast<int32_t>(sym.size());
    sym.push_back(Symbol{id, pos - 1, pos + 1, true});
  };
  // An unknown character waits here until a known one or the end (tokenizers' order: byte
  // fallback tokens do not flush it).
  bool unk_pending = false;
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(char_len(static_cast<uint8_t>(word[i])), word.size() - i);
    const std::string_view ch = word.substr(i, n);
    i += n;
    if (const auto id = vocab_.id_of(ch)) {
      if (unk_pending) add(*unk_id_);
      unk_pending = false;
      add(*id);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (const char b : ch) all = all && byte_ids_[static_cast<uint8_t>(b)] >= 0;
      if (all) {
        for (const char b : ch) add(byte_ids_[static_cast<uint8_t>(b)]);
        continue;
      }
    }
    if (!unk_id_) continue;  // tokenizers drops it
    if (unk_pending && !fuse_unk_) add(*unk_id_);
    unk_pending = true;
  }
  if (unk_pending) add(*unk_id_);
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

// The BPE model of a tokenizer.json (tokenizers' models/bpe): a vocabulary (token -> id) and a
// ranked list of merges. A word (one pre-tokenized piece) starts as its characters' ids; the
// adjacent pair of lowest merge rank (leftmost on ties) is merged until no pair has a rank.
// merge_word() runs that with a linked list of symbols and a min-heap of candidate pairs,
// re-checked when popped (O(n log n) per word, the algorithm of tokenizers' Word::merge_all, so
// that even merges that make one token from two different pairs agree), and caches the result
// of short words.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace snug::tok {

struct BpeOptions {
  std::optional<int32_t> unk_id;  // emitted for a character outside the vocabulary
  bool fuse_unk = false;          // consecutive unknown characters give one unk_id
  bool ignore_merges = false;     // a word that is itself a vocabulary entry is that entry
};

class BpeModel {
 public:
  // `vocab`: token -> id, ids 0..n-1 each once. `merges`: (left, right) by rank; each token and
  // their concatenation must be in `vocab`. Errors start with `what`.
  BpeModel(std::unordered_map<std::string, int32_t> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
           const std::string& what);

  // Appends the ids of `word` to `out`. A character outside the vocabulary gives unk_id, or
  // nothing when there is none (as in tokenizers).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  std::optional<int32_t> id_of(std::string_view token) const;
  const std::string& token_of(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  // Looked up by string_view without building a std::string (C++20 heterogeneous lookup).
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  template <typename V>
  using StringMap = std::unordered_map<std::string, V, Hash, std::equal_to<>>;

  StringMap<int32_t> vocab_;
  std::vector<std::string> tokens_;  // id -> token
  std::unordered_map<uint64_t, Merge> merges_;
  BpeOptions options_;

  // Words shorter than kCacheMaxBytes, at most kCacheEntries of them (then no more are added).
  static constexpr size_t kCacheMaxBytes = 256, kCacheEntries = 10000;
  mutable std::mutex cache_mutex_;
  mutable StringMap<std::vector<int32_t>> cache_;
};

}  // namespace snug::tok

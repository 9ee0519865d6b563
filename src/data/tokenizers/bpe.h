// The BPE model of a tokenizer.json (tokenizers' models/bpe): a vocabulary (token -> id) and a
// ranked list of merges. A word (one pre-tokenized piece) starts as its characters' ids; the
// adjacent pair of lowest merge rank (leftmost on ties) is merged until no pair has a rank.
// merge_word() runs that with a linked list of symbols and a min-heap of candidate pairs,
// re-checked when popped (O(n log n) per word, the algorithm of tokenizers' Word::merge_all, so
// that even merges that make one token from two different pairs agree), and caches the result
// of short words.
//
// A character outside the vocabulary becomes, in this order of preference: its UTF-8 bytes as
// the tokens <0xNN> (byte_fallback, SentencePiece style: Llama 2, Mistral) when all of them are
// in the vocabulary; unk_token (consecutive ones fused into one with fuse_unk); or nothing.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/tokenizers/vocab.h"

namespace snug::tok {

class BpeModel final : public Model {
 public:
  // `f`: the "model" object of type BPE (every field checked, errors name it).
  explicit BpeModel(const Fields& f);

  void encode_word(std::string_view word, std::vector<int32_t>& out) const override;
  const Vocab& vocab() const override { return vocab_; }

 private:
  struct Merge {
    uint32_t rank;
    int32_t new_id;
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  Vocab vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;       // consecutive unknown characters give one unk_id
  bool ignore_merges_ = false;  // a word that is itself a vocabulary entry is that entry
  bool byte_fallback_ = false;
  std::array<int32_t, 256> byte_ids_{};  // the id of <0xNN>, or -1

  // Words shorter than kCacheMaxBytes, at most kCacheEntries of them (then no more are added).
  static constexpr size_t kCacheMaxBytes = 256, kCacheEntries = 10000;
  mutable std::mutex cache_mutex_;
  mutable StringMap<std::vector<int32_t>> cache_;
};

}  // namespace snug::tok

// The WordPiece model of a tokenizer.json (BERT; tokenizers' models/wordpiece): a word is cut
// greedily, longest vocabulary match first, from the left; every piece after the first is looked
// up with the continuing-subword prefix ("##"). A word with a part no vocabulary entry matches,
// or longer than max_input_chars_per_word characters, is the single unk_token.
//
// The longest match is found by walking a byte trie of the vocabulary (one for a word's first
// piece, one for the pieces after it, without the prefix): O(word bytes x longest token) per
// word. Shrinking the candidate one character at a time and hashing each was cubic in the word:
// 20000 characters under max_input_chars_per_word 1e12 took minutes (issue 29).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/tokenizers/vocab.h"

namespace snug::tok {

class WordPieceModel final : public Model {
 public:
  // `f`: the "model" object of type WordPiece (every field checked, errors name it).
  explicit WordPieceModel(const Fields& f);

  void encode_word(std::string_view word, std::vector<int32_t>& out) const override;
  const Vocab& vocab() const override { return vocab_; }

 private:
  // Tokens by their bytes: node 0 is the root; edges keyed by node << 8 | byte.
  struct Trie {
    std::unordered_map<uint64_t, uint32_t> edges;
    std::vector<int32_t> ids = {-1};  // the token ending at each node, or -1
    void insert(std::string_view token, int32_t id);
    // The child of `node` by `byte`, or 0 (the root is nobody's child).
    uint32_t child(uint32_t node, uint8_t byte) const {
      const auto it = edges.find(uint64_t{node} << 8 | byte);
      return it == edges.end() ? 0 : it->second;
    }
  };

  Vocab vocab_;
  Trie first_, continuing_;  // all tokens; the tokens that start with prefix_, without it
  int32_t unk_id_ = 0;
  std::string prefix_;
  int64_t max_chars_ = 0;
};

}  // namespace snug::tok

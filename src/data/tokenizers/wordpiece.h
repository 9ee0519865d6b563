// The WordPiece model of a tokenizer.json (BERT; tokenizers' models/wordpiece): a word is cut
// greedily, longest vocabulary match first, from the left; every piece after the first is looked
// up with the continuing-subword prefix ("##"). A word with a part no vocabulary entry matches,
// or longer than max_input_chars_per_word characters, is the single unk_token.
#pragma once

#include <string>

#include "data/tokenizers/vocab.h"

namespace snug::tok {

class WordPieceModel final : public Model {
 public:
  // `f`: the "model" object of type WordPiece (every field checked, errors name it).
  explicit WordPieceModel(const Fields& f);

  void encode_word(std::string_view word, std::vector<int32_t>& out) const override;
  const Vocab& vocab() const override { return vocab_; }

 private:
  Vocab vocab_;
  int32_t unk_id_ = 0;
  std::string prefix_;
  int64_t max_chars_ = 0;
};

}  // namespace snug::tok

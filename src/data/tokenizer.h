// ByteTokenizer: the identity map between bytes and token ids (vocabulary 256). Every byte string
// round-trips exactly, UTF-8 or not; this is the tokenizer of the built-in corpus and of plain
// text datasets (see docs/data.md).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace snug {

class ByteTokenizer {
 public:
  static constexpr int64_t kVocabSize = 256;

  int64_t vocab_size() const { return kVocabSize; }
  // One token per byte, value 0..255.
  std::vector<int32_t> encode(std::string_view text) const;
  // Throws snug::Error naming the position if a token is outside [0, 256).
  std::string decode(std::span<const int32_t> tokens) const;
};

}  // namespace snug

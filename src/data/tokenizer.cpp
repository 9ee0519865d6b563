#include "data/tokenizer.h"

#include "core/error.h"

namespace snug {

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

std::string ByteTokenizer::decode(std::span<const int32_t> tokens) const {
  std::string out(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    SNUG_CHECK(t >= 0 && t < kVocabSize, "ByteTokenizer::decode: token ", t, " at position ", i,
               " is not a byte (the byte vocabulary is 0..255)");
    out[i] = static_cast<char>(static_cast<unsigned char>(t));
  }
  return out;
}

}  // namespace snug

// A Hugging Face tokenizer.json, read and run as the `tokenizers` package runs it, id for id
// (tests/data/tokenizer_json_test.cpp holds it to ids `tokenizers` wrote;
// docs/tokenizers.md): byte-level BPE (GPT-2, GPT-NeoX, Llama 3, Qwen2), WordPiece (BERT), and
// SentencePiece-style BPE with byte fallback (Llama 2, Mistral). The pipeline's parts live in
// data/tokenizers/.
//
// encode(text), as tokenizers' Tokenizer::encode:
//   1. added tokens with normalized=false are cut out of the raw text (leftmost, longest first)
//      and become their ids, never split or normalized;
//   2. the rest is normalized (normalizer.h), then added tokens with normalized=true are cut out;
//   3. the pre-tokenizer (pre_tokenizer.h) splits what is left into words;
//   4. the model (BPE: bpe.h, WordPiece: wordpiece.h) turns each word into ids;
//   5. with add_special_tokens (tokenizers' default), the post-processor's special tokens go
//      around them (post_processor.h: [CLS] ... [SEP], <s> ..., <|begin_of_text|> ...).
// decode(ids): every id's token string through the decoder (decoder.h).
//
// Only what is implemented is accepted: every field of the file is either understood or the
// file is refused with a snug::Error naming the file and the field (never silently ignored).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace snug {

class JsonTokenizer {
 public:
  // Reads the file at `path`.
  static JsonTokenizer load(const std::string& path);
  // Parses `json`; errors start with `what` (e.g. "tokenizer 'x/tokenizer.json'").
  static JsonTokenizer parse(std::string_view json, const std::string& what);

  JsonTokenizer(JsonTokenizer&&) noexcept;
  JsonTokenizer& operator=(JsonTokenizer&&) noexcept;
  ~JsonTokenizer();

  // `text` must be valid UTF-8 (else snug::Error naming the byte offset).
  // `add_special_tokens`: as tokenizers' encode (default on), the post-processor's tokens.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const;
  // An id outside [0, vocab_size()) is a snug::Error naming its position. `skip_special`: leave
  // out added tokens marked special (tokenizers' skip_special_tokens).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  // The normalizer alone (the identity without one): decode(encode(x)) == normalize(x).
  std::string normalize(std::string_view text) const;

  // Model vocabulary plus the added tokens that are not in it.
  int64_t vocab_size() const;
  // The token string of `id` (byte-level alphabet for model tokens), e.g. for printing pieces.
  const std::string& token(int32_t id) const;
  // The id of a token string (model vocabulary or added token), if it has one.
  std::optional<int32_t> token_to_id(std::string_view token) const;

 private:
  struct Impl;
  explicit JsonTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace snug

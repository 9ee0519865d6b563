// The token <-> id table of a tokenizer.json model (model.vocab), shared by the BPE and
// WordPiece models, and the interface the tokenizer runs a model through.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/tokenizers/json_fields.h"

namespace snug::tok {

// Looked up by string_view without building a std::string (C++20 heterogeneous lookup).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <typename V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

class Vocab {
 public:
  // Reads `f`'s "vocab" object: token -> id, the ids 0..n-1 each once (else a snug::Error
  // naming the field).
  explicit Vocab(const Fields& f);
  std::optional<int32_t> id_of(std::string_view token) const {
    const auto it = ids_.find(token);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  const std::string& token_of(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  StringMap<int32_t> ids_;
  std::vector<std::string> tokens_;  // id -> token
};

// What the tokenizer needs of a model: the ids of one pre-tokenized word, and the vocabulary.
class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of `word` (non-empty, valid UTF-8) to `out`.
  virtual void encode_word(std::string_view word, std::vector<int32_t>& out) const = 0;
  virtual const Vocab& vocab() const = 0;
};

// The model of a tokenizer.json (`f` is its "model" object): BPE or WordPiece.
std::unique_ptr<Model> parse_model(const Fields& f);

}  // namespace snug::tok

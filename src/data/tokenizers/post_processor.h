// The post-processor of a tokenizer.json, for one sequence: the special tokens that encode()
// puts before and after the ids when add_special_tokens is on (tokenizers' Tokenizer.encode
// default). Implemented: TemplateProcessing (its "single" template: "[CLS] $A [SEP]" for BERT,
// "<s> $A" for Llama 2, "<|begin_of_text|> $A" for Llama 3; "pair" is checked, as snug encodes
// no pairs), BertProcessing (cls, sep), ByteLevel (offsets only: nothing), and a Sequence.
#pragma once

#include <cstdint>
#include <vector>

#include "data/tokenizers/json_fields.h"

namespace snug::tok {

class PostProcessor {
 public:
  PostProcessor() = default;  // none
  // `f`: the "post_processor" object; every id must be below `vocab_size` (errors name the
  // field).
  PostProcessor(const Fields& f, int64_t vocab_size) { parse(f, vocab_size, true); }

  const std::vector<int32_t>& prefix() const { return prefix_; }
  const std::vector<int32_t>& suffix() const { return suffix_; }

 private:
  void parse(const Fields& f, int64_t vocab_size, bool top);
  void parse_template(const Fields& f, int64_t vocab_size);
  std::vector<int32_t> prefix_, suffix_;
};

}  // namespace snug::tok

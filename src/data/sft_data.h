// Instruction data: jsonl records tokenized into examples (token ids + labels) as TRL's SFTTrainer
// prepares them (docs/data.md, "jsonl data"; tests/data/sft_data_test.cpp holds snug to
// TRL's own preprocessing through committed fixtures).
//
// One JSON object per line, in one of TRL's formats:
//   {"text": "..."}                                     language modelling: every token trains
//   {"prompt": "...", "completion": "..."}              loss on the completion only (default)
//   {"messages": [{"role": ..., "content": ...}, ...]}  a conversation, rendered with the model's
//                                                       chat template (data/chat_template.h)
//   {"prompt": [messages], "completion": [messages]}    a conversation split into both
// Other keys of a record are ignored (ids, sources); keys that would change the rendering and
// that snug does not implement ("tools", "chat_template_kwargs", a message's "tool_calls") are
// refused. Blank lines are skipped. Every problem is a snug::Error naming the file, the line
// and the field ("data/a.jsonl:7: messages[2].role: ...").
//
// Tokenization, as TRL 1.16's SFTTrainer._prepare_dataset:
//   - text and string prompt/completion: eos_token is appended to the text (the completion)
//     unless it already ends with it; the text is encoded with the tokenizer's special tokens
//     (its post-processor's BOS); a prompt-completion record's completion starts where the ids
//     of the prompt alone and of prompt + completion first differ;
//   - conversations: rendered, then encoded without special tokens (the template writes them);
//     a conversational prompt is rendered with the generation prompt, and the completion again
//     starts where the two encodings differ;
//   - labels are the ids, -100 where a mask applies: outside the completion (completion-only
//     loss, on by default for prompt-completion records) and outside the assistant turns
//     (--assistant-only-loss, conversations only).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/chat_template.h"
#include "data/tokenizer_json.h"

namespace snug {

inline constexpr int32_t kIgnoreIndex = -100;

// A model folder's tokenizer: tokenizer.json with the special tokens and chat template of the
// tokenizer_config.json beside it (special_tokens_map.json where the config lacks a token;
// chat_template.jinja, when present, wins over the config's chat_template, as in transformers).
struct ModelTokenizer {
  ModelTokenizer(JsonTokenizer t, std::string where)
      : tokenizer(std::move(t)), path(std::move(where)) {}
  JsonTokenizer tokenizer;
  std::string path;                             // the tokenizer.json read
  std::string bos_token, eos_token, pad_token;  // "" when the tokenizer has none
  std::string chat_template_text;               // "" when there is none
  std::string chat_template_where;              // the file it came from

  // `path`: a tokenizer.json, or a folder holding one.
  static ModelTokenizer load(const std::string& path);
  // The chat template, recognised (data/chat_template.h); throws naming the file when there is
  // none or snug does not know it.
  const ChatTemplate& chat_template() const;
  // Sets the template directly (tests, the fuzz target).
  void set_chat_template(const ChatTemplate& t) { chat_ = t; }
  // The padding id: pad_token's, else eos_token's, else 0 (padding is never a target).
  int32_t pad_id() const;

 private:
  mutable std::optional<ChatTemplate> chat_;
};

struct SftRecord {
  enum class Kind { text, prompt_completion, messages, chat_prompt_completion };
  Kind kind = Kind::text;
  std::string text, prompt, completion;  // text / prompt_completion
  std::vector<ChatMessage> messages, prompt_messages, completion_messages;
};

// Parses one line; `where` ("file:line") starts every error message.
SftRecord parse_sft_record(std::string_view line, const std::string& where);

struct SftOptions {
  bool completion_only_loss = true;
  bool assistant_only_loss = false;
  // The length examples are cut to afterwards (0: none): the assistant mask stops at the first
  // turn that starts past it, since finding a turn's tokens re-encodes the text before it
  // (3000 turns took 83 s, issue 29).
  int64_t max_length = 0;
};

struct Example {
  std::vector<int32_t> ids;
  std::vector<int32_t> labels;  // ids, or kIgnoreIndex where no loss applies
};

Example tokenize_record(const SftRecord& r, const ModelTokenizer& tok, const SftOptions& o,
                        const std::string& where);

// Every record of `path`: a .jsonl file, or a folder whose *.jsonl files are read in name order.
// Examples longer than `max_length` tokens (> 0) are cut to their first max_length tokens, and
// examples left without any label are dropped (TRL's keep_start truncation); `dropped` counts
// them. Throws when no example is left.
struct SftData {
  std::vector<Example> examples;
  int64_t records = 0;
  int64_t dropped = 0;
  std::string describe;  // "jsonl data/x.jsonl (120 records, 34567 tokens)"
};
SftData load_sft_data(const std::string& path, const ModelTokenizer& tok, const SftOptions& o,
                      int64_t max_length);

// True when `spec` names jsonl data: a path ending in .jsonl, or a folder.
bool is_jsonl_spec(const std::string& spec);

}  // namespace snug

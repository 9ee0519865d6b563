// Chat templates: rendering a conversation into the text a model was instruction-tuned on, as
// transformers' apply_chat_template renders a tokenizer_config.json "chat_template" (Jinja, with
// trim_blocks and lstrip_blocks).
//
// Why recognition instead of a Jinja engine: no C++ Jinja is packaged in Debian, and a partial
// engine that renders an unknown template slightly differently would train a model on text it
// never sees at inference, silently. snug therefore accepts a template only when its text is,
// byte for byte, one it knows (compared by FNV-1a 64 of the text, as TRL compares templates by
// identity), and renders that template with code written for it; any other template is refused
// with a snug::Error naming the file. tests/data/chat_template_test.cpp holds every known
// template to transformers' own rendering (fixtures written by tests/golden/gen_chat_golden.py).
//
// Assistant spans (for --assistant-only-loss): stock templates carry no {% generation %} markers,
// so the renderer itself reports, for each assistant message, the byte span of what the model
// must learn to write: the message content as the template writes it plus the end-of-turn text
// that follows it (eos_token, <|eot_id|>, <|im_end|>, ...), never the role header. This is the
// span TRL's training variants of the templates wrap in {% generation %} (docs/data.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace snug {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant" (others are refused when records are read)
  std::string content;
};

struct RenderedChat {
  std::string text;
  // [begin, end) byte offsets into `text` of each assistant turn's trainable part, in order.
  std::vector<std::pair<size_t, size_t>> assistant_spans;
};

class ChatTemplate {
 public:
  // The known template whose text is exactly `text`; throws snug::Error naming `where` (e.g.
  // "model/tokenizer_config.json") and listing the known ones otherwise.
  static ChatTemplate recognise(std::string_view text, const std::string& where);
  // The known template `name` (one of known_names()); throws otherwise.
  static ChatTemplate by_name(const std::string& name);
  // Names of the known templates ("llama3", "chatml", ...), in the order docs/data.md lists them.
  static std::vector<std::string> known_names();

  const std::string& name() const { return name_; }

  // As apply_chat_template(messages, tokenize=False, add_generation_prompt=...). `bos`, `eos`:
  // the tokenizer's bos_token and eos_token strings ("" when it has none: Jinja's undefined).
  // A conversation the template itself rejects (raise_exception: roles that do not alternate, a
  // system message where none is supported) is a snug::Error carrying the template's message.
  RenderedChat render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                      const std::string& bos, const std::string& eos) const;

 private:
  enum class Kind {
    llama3,
    chatml,
    qwen2,
    qwen2_5,
    mistral,
    mistral_eos_space,
    zephyr,
    gemma,
    phi3
  };
  ChatTemplate(std::string name, Kind kind) : name_(std::move(name)), kind_(kind) {}
  std::string name_;
  Kind kind_;
};

// Python's str.strip() (Jinja's `trim` filter): strips the characters str.isspace() accepts.
std::string python_strip(std::string_view s);

}  // namespace snug

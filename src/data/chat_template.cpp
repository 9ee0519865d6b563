#include "data/chat_template.h"

#include "core/error.h"
#include "io/excerpt.h"
#include "io/fnv1a.h"

namespace snug {

namespace {

// The templates snug renders, by the FNV-1a 64 of their exact text. Where each text comes from
// (the model repositories that ship it) is in tests/golden/gen_chat_golden.py and docs/data.md;
// the fixtures it writes hold each text, so the test checks these fingerprints too.
struct Known {
  const char* name;
  uint64_t fnv;
  int kind;  // ChatTemplate::Kind
};

// Decodes one UTF-8 code point at s[i] (the text is valid UTF-8: records are checked when read);
// returns its length in bytes.
size_t utf8_at(std::string_view s, size_t i, uint32_t& cp) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (i + n > s.size()) n = 1;
  cp = n == 1 ? c : c & (0x3F >> (n - 1));
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return n;
}

bool python_space(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

[[noreturn]] void template_raises(const std::string& name, const char* message) {
  throw Error(detail::concat("chat template ", name, " refuses the conversation: ", message));
}

// Appends text; with `assistant`, records it as (part of) the current assistant span.
struct Out {
  RenderedChat r;
  void add(std::string_view s) { r.text += s; }
  void assistant(std::string_view s) {
    const size_t b = r.text.size();
    r.text += s;
    if (!r.assistant_spans.empty() && r.assistant_spans.back().second == b)
      r.assistant_spans.back().second = r.text.size();
    else
      r.assistant_spans.emplace_back(b, r.text.size());
  }
};

const char* const kQwenSystem =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

}  // namespace

std::string python_strip(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e) {
    uint32_t cp;
    const size_t n = utf8_at(s, b, cp);
    if (!python_space(cp)) break;
    b += n;
  }
  while (e > b) {
    size_t start = e - 1;
    while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    uint32_t cp;
    utf8_at(s, start, cp);
    if (!python_space(cp)) break;
    e = start;
  }
  return std::string(s.substr(b, e - b));
}

namespace {
const std::vector<Known>& known() {
  // Kind values as ChatTemplate::Kind's order: llama3, chatml, qwen2, qwen2_5, mistral,
  // mistral_eos_space, zephyr, gemma, phi3.
  static const std::vector<Known> list = {
      {"llama3", 0x0e60067a5537498eull, 0},  {"chatml", 0xa41d6bae9b9141bcull, 1},
      {"qwen2", 0x75e88977b2787cd7ull, 2},   {"qwen2.5", 0xc2b27ee60f1b8775ull, 3},
      {"mistral", 0x8c734b90b4f8d84dull, 4}, {"mistral-v0.1", 0xc730acc029ce6ee0ull, 5},
      {"zephyr", 0x0af6ea9cf9896e56ull, 6},  {"gemma", 0x5c10ee65212d93b3ull, 7},
      {"phi3", 0xecebdb26677c663dull, 8},
  };
  return list;
}
}  // namespace

std::vector<std::string> ChatTemplate::known_names() {
  std::vector<std::string> names;
  for (const Known& k : known()) names.emplace_back(k.name);
  return names;
}

ChatTemplate ChatTemplate::by_name(const std::string& name) {
  for (const Known& k : known())
    if (name == k.name) return ChatTemplate(k.name, static_cast<Kind>(k.kind));
  throw Error("no chat template is named '" + excerpt(name) + "'");
}

ChatTemplate ChatTemplate::recognise(std::string_view text, const std::string& where) {
  const uint64_t h = fnv1a64(text);
  for (const Known& k : known())
    if (k.fnv == h) return ChatTemplate(k.name, static_cast<Kind>(k.kind));
  std::string names;
  for (const Known& k : known()) names += (names.empty() ? "" : ", ") + std::string(k.name);
  throw Error(detail::concat(
      where, ": chat_template (FNV-1a 64 ", hex64(h),
      ") is not one snug knows; it renders only these, byte for byte: ", names,
      ". snug has no Jinja engine and never approximates a template (docs/data.md)"));
}

RenderedChat ChatTemplate::render(const std::vector<ChatMessage>& messages,
                                  bool add_generation_prompt, const std::string& bos,
                                  const std::string& eos) const {
  Out o;
  const size_t n = messages.size();
  switch (kind_) {
    case Kind::llama3:
      for (size_t i = 0; i < n; ++i) {
        const ChatMessage& m = messages[i];
        if (i == 0) o.add(bos);
        o.add("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n");
        const std::string body = python_strip(m.content) + "<|eot_id|>";
        if (m.role == "assistant")
          o.assistant(body);
        else
          o.add(body);
      }
      if (add_generation_prompt) o.add("<|start_header_id|>assistant<|end_header_id|>\n\n");
      break;
    case Kind::chatml:
    case Kind::qwen2:
    case Kind::qwen2_5:
      if (kind_ == Kind::qwen2_5) {
        SNUG_CHECK(n > 0, "chat template ", name_, " needs at least one message");
        if (messages[0].role == "system")
          o.add("<|im_start|>system\n" + messages[0].content + "<|im_end|>\n");
        else
          o.add(std::string("<|im_start|>system\n") + kQwenSystem + "<|im_end|>\n");
      }
      for (size_t i = 0; i < n; ++i) {
        const ChatMessage& m = messages[i];
        if (kind_ == Kind::qwen2 && i == 0 && m.role != "system")
          o.add("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n");
        if (kind_ == Kind::qwen2_5 && i == 0 && m.role == "system") continue;
        if (m.role == "assistant") {
          o.add("<|im_start|>assistant");
          o.assistant("\n" + m.content + "<|im_end|>\n");
        } else {
          o.add("<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n");
        }
      }
      if (add_generation_prompt) o.add("<|im_start|>assistant\n");
      break;
    case Kind::mistral:
    case Kind::mistral_eos_space:
      o.add(bos);
      for (size_t i = 0; i < n; ++i) {
        const ChatMessage& m = messages[i];
        if ((m.role == "user") != (i % 2 == 0))
          template_raises(name_,
                          "Conversation roles must alternate user/assistant/user/assistant/...");
        if (m.role == "user") {
          o.add("[INST] " + m.content + " [/INST]");
        } else if (m.role == "assistant") {
          o.assistant(m.content + eos);
          if (kind_ == Kind::mistral_eos_space) o.add(" ");
        } else {
          template_raises(name_, "Only user and assistant roles are supported!");
        }
      }
      break;
    case Kind::zephyr:
      for (size_t i = 0; i < n; ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "assistant") {
          o.add("<|assistant|>\n");
          o.assistant(m.content + eos + "\n");
        } else {
          o.add("<|" + m.role + "|>\n" + m.content + eos + "\n");
        }
        if (i + 1 == n && add_generation_prompt) o.add("<|assistant|>\n");
      }
      break;
    case Kind::gemma:
      o.add(bos);
      if (n > 0 && messages[0].role == "system")
        template_raises(name_, "System role not supported");
      for (size_t i = 0; i < n; ++i) {
        const ChatMessage& m = messages[i];
        if ((m.role == "user") != (i % 2 == 0))
          template_raises(name_,
                          "Conversation roles must alternate user/assistant/user/assistant/...");
        if (m.role == "assistant") {
          o.add("<start_of_turn>model\n");
          o.assistant(python_strip(m.content) + "<end_of_turn>\n");
        } else {
          o.add("<start_of_turn>" + m.role + "\n" + python_strip(m.content) + "<end_of_turn>\n");
        }
      }
      if (add_generation_prompt) o.add("<start_of_turn>model\n");
      break;
    case Kind::phi3:
      for (size_t i = 0; i < n; ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "assistant") {
          o.add("<|assistant|>\n");
          o.assistant(m.content + "<|end|>\n");
        } else {
          o.add("<|" + m.role + "|>\n" + m.content + "<|end|>\n");
        }
      }
      if (add_generation_prompt) {
        o.add("<|assistant|>\n");
      } else if (n > 0 && messages.back().role == "assistant") {
        o.assistant(eos);  // the last turn's end: TRL's phi3 training variant trains it too
      } else {
        o.add(eos);
      }
      break;
  }
  return o.r;
}

}  // namespace snug

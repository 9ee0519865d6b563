#include "data/sft_data.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "io/excerpt.h"
#include "io/json_input.h"

namespace snug {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool file_exists(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// A special token in tokenizer_config.json / special_tokens_map.json: a string, an AddedToken
// object {"content": ...}, or null.
std::string special_token(const json& j, const std::string& key, const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return "";
  const json& v = j[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  throw Error(detail::concat(where, ": ", key,
                             " must be a string or an object with a string "
                             "\"content\""));
}

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

bool ends_with_nonempty(const std::string& s, const std::string& suffix) {
  return !suffix.empty() && s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<ChatMessage> parse_messages(const json& j, const std::string& where,
                                        const std::string& field) {
  SNUG_CHECK(j.is_array(), where, ": ", field, ": must be a list of messages");
  SNUG_CHECK(!j.empty(), where, ": ", field, ": must hold at least one message");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string f = detail::concat(field, "[", i, "]");
    const json& m = j[i];
    SNUG_CHECK(m.is_object(), where, ": ", f,
               ": a message must be an object with \"role\" and "
               "\"content\"");
    SNUG_CHECK(!m.contains("tool_calls"), where, ": ", f,
               ".tool_calls: tool calls are not supported (no template snug renders has them)");
    SNUG_CHECK(m.contains("role") && m["role"].is_string(), where, ": ", f,
               ".role: missing or not a string");
    SNUG_CHECK(m.contains("content") && m["content"].is_string(), where, ": ", f,
               ".content: missing or not a string");
    ChatMessage msg{m["role"].get<std::string>(), m["content"].get<std::string>()};
    SNUG_CHECK(msg.role == "system" || msg.role == "user" || msg.role == "assistant", where, ": ",
               f, ".role: '", excerpt(msg.role), "' is not one of system, user, assistant");
    out.push_back(std::move(msg));
  }
  return out;
}

// The token index of `ids` (the encoding of `text`) at byte `at`, the edge of a byte span: the
// prefix text[:at] is encoded; where that encoding is a prefix of `ids` the edge is a token
// boundary; where it differs only in its last token, that token of `ids` straddles the edge and
// counts as overlapping the span (inside it: before the start edge, after the end edge). So the
// tokens of a span [b, e) are [token_at(b, false), token_at(e, true)).
size_t token_at(const JsonTokenizer& tok, const std::string& text, const std::vector<int32_t>& ids,
                size_t at, bool end) {
  const std::vector<int32_t> pre = tok.encode(std::string_view(text).substr(0, at), false);
  const size_t k = common_prefix(pre, ids);
  if (k == pre.size()) return k;  // a token boundary
  return end ? std::min(k + 1, ids.size()) : k;
}

}  // namespace

ModelTokenizer ModelTokenizer::load(const std::string& path) {
  std::error_code ec;
  fs::path file = path;
  if (fs::is_directory(file, ec)) file /= "tokenizer.json";
  SNUG_CHECK(file_exists(file), "tokenizer: ", file.string(),
             " does not exist (--tokenizer takes a tokenizer.json or a folder holding one)");
  ModelTokenizer t(JsonTokenizer::load(file.string()), file.string());
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  json map, config;
  const fs::path map_path = dir / "special_tokens_map.json";
  const fs::path config_path = dir / "tokenizer_config.json";
  if (file_exists(map_path))
    map = parse_json_input(read_input_file(map_path.string(), map_path.string(), 1 << 24),
                           map_path.string());
  if (file_exists(config_path))
    config = parse_json_input(
        read_input_file(config_path.string(), config_path.string(), int64_t{1} << 26),
        config_path.string());
  SNUG_CHECK(map.is_null() || map.is_object(), map_path.string(), ": must be a JSON object");
  SNUG_CHECK(config.is_null() || config.is_object(), config_path.string(),
             ": must be a JSON object");
  for (auto [key, dest] :
       {std::pair{"bos_token", &t.bos_token}, std::pair{"eos_token", &t.eos_token},
        std::pair{"pad_token", &t.pad_token}}) {
    const bool in_config = config.is_object() && config.contains(key);
    if (!in_config && !map.is_object()) continue;
    const fs::path& from = in_config ? config_path : map_path;
    *dest = special_token(in_config ? config : map, key, from.string());
    // Quoted as an excerpt: the file is untrusted, and the token can be a megabyte.
    SNUG_CHECK(dest->empty() || t.tokenizer.token_to_id(*dest).has_value(), from.string(), ": ",
               key, " '", excerpt(*dest), "' is not in the vocabulary of ", t.path);
  }
  const fs::path jinja = dir / "chat_template.jinja";
  if (file_exists(jinja)) {
    t.chat_template_text = read_input_file(jinja.string(), jinja.string(), 1 << 24);
    t.chat_template_where = jinja.string();
  } else if (config.is_object() && config.contains("chat_template") &&
             !config["chat_template"].is_null()) {
    const json& c = config["chat_template"];
    t.chat_template_where = config_path.string();
    if (c.is_string()) {
      t.chat_template_text = c.get<std::string>();
    } else if (c.is_array()) {  // [{"name": ..., "template": ...}]: transformers picks "default"
      for (const json& e : c)
        if (e.is_object() && e.value("name", json()) == "default" && e.contains("template") &&
            e["template"].is_string())
          t.chat_template_text = e["template"].get<std::string>();
      SNUG_CHECK(!t.chat_template_text.empty(), config_path.string(),
                 ": chat_template is a list without a \"default\" entry");
    } else {
      throw Error(config_path.string() + ": chat_template must be a string or a list");
    }
  }
  return t;
}

const ChatTemplate& ModelTokenizer::chat_template() const {
  if (!chat_) {
    SNUG_CHECK(!chat_template_text.empty(), path,
               ": conversational records need a chat template, and neither "
               "tokenizer_config.json nor chat_template.jinja beside it has one");
    chat_ = ChatTemplate::recognise(chat_template_text, chat_template_where);
  }
  return *chat_;
}

int32_t ModelTokenizer::pad_id() const {
  for (const std::string* s : {&pad_token, &eos_token})
    if (!s->empty()) return *tokenizer.token_to_id(*s);
  return 0;
}

SftRecord parse_sft_record(std::string_view line, const std::string& where) {
  json j;
  try {
    j = parse_json_input(line, where);
  } catch (const Error& e) {
    throw Error(detail::concat(e.what(), " (a .jsonl file holds one JSON object per line)"));
  }
  SNUG_CHECK(j.is_object(), where, ": a record must be a JSON object");
  SNUG_CHECK(!j.contains("tools"), where, ": tools: tool definitions are not supported");
  SNUG_CHECK(!j.contains("chat_template_kwargs"), where,
             ": chat_template_kwargs: template arguments are not supported");
  const bool text = j.contains("text"), prompt = j.contains("prompt"),
             completion = j.contains("completion"), messages = j.contains("messages");
  SNUG_CHECK(int(text) + int(prompt || completion) + int(messages) == 1, where,
             ": a record needs exactly one of \"text\", \"prompt\" + \"completion\" or "
             "\"messages\"");
  SftRecord r;
  if (text) {
    SNUG_CHECK(j["text"].is_string(), where, ": text: must be a string");
    r.text = j["text"].get<std::string>();
    return r;
  }
  if (messages) {
    r.kind = SftRecord::Kind::messages;
    r.messages = parse_messages(j["messages"], where, "messages");
    return r;
  }
  SNUG_CHECK(prompt, where, ": prompt: missing (a record with \"completion\" needs a \"prompt\")");
  SNUG_CHECK(completion, where,
             ": completion: missing (a record with \"prompt\" needs a "
             "\"completion\")");
  if (j["prompt"].is_string()) {
    SNUG_CHECK(j["completion"].is_string(), where,
               ": completion: must be a string like the prompt");
    r.kind = SftRecord::Kind::prompt_completion;
    r.prompt = j["prompt"].get<std::string>();
    r.completion = j["completion"].get<std::string>();
    return r;
  }
  SNUG_CHECK(j["prompt"].is_array(), where, ": prompt: must be a string or a list of messages");
  r.kind = SftRecord::Kind::chat_prompt_completion;
  r.prompt_messages = parse_messages(j["prompt"], where, "prompt");
  r.completion_messages = parse_messages(j["completion"], where, "completion");
  return r;
}

Example tokenize_record(const SftRecord& r, const ModelTokenizer& tok, const SftOptions& o,
                        const std::string& where) {
  const JsonTokenizer& t = tok.tokenizer;
  Example ex;
  std::vector<uint8_t> keep;  // per token: does every applicable mask let it train
  auto chat = [&](const std::vector<ChatMessage>& m, bool gen) {
    try {
      return tok.chat_template().render(m, gen, tok.bos_token, tok.eos_token);
    } catch (const Error& e) {
      throw Error(detail::concat(where, ": ", e.what()));
    }
  };
  auto eos_appended = [&](const std::string& s) {
    return ends_with_nonempty(s, tok.eos_token) ? s : s + tok.eos_token;
  };
  size_t completion_start = 0;
  RenderedChat rendered;
  switch (r.kind) {
    case SftRecord::Kind::text:
      ex.ids = t.encode(eos_appended(r.text), true);
      break;
    case SftRecord::Kind::prompt_completion: {
      const std::vector<int32_t> p = t.encode(r.prompt, true);
      ex.ids = t.encode(r.prompt + eos_appended(r.completion), true);
      completion_start = common_prefix(p, ex.ids);
      break;
    }
    case SftRecord::Kind::messages:
      rendered = chat(r.messages, false);
      ex.ids = t.encode(rendered.text, false);
      break;
    case SftRecord::Kind::chat_prompt_completion: {
      std::vector<ChatMessage> all = r.prompt_messages;
      all.insert(all.end(), r.completion_messages.begin(), r.completion_messages.end());
      const std::vector<int32_t> p = t.encode(chat(r.prompt_messages, true).text, false);
      rendered = chat(all, false);
      ex.ids = t.encode(rendered.text, false);
      completion_start = common_prefix(p, ex.ids);
      break;
    }
  }
  keep.assign(ex.ids.size(), 1);
  const bool pc = r.kind == SftRecord::Kind::prompt_completion ||
                  r.kind == SftRecord::Kind::chat_prompt_completion;
  if (pc && o.completion_only_loss)
    std::fill(keep.begin(), keep.begin() + static_cast<std::ptrdiff_t>(completion_start), 0);
  const bool conversational =
      r.kind == SftRecord::Kind::messages || r.kind == SftRecord::Kind::chat_prompt_completion;
  if (o.assistant_only_loss && conversational) {
    std::vector<uint8_t> assistant(ex.ids.size(), 0);
    bool past_the_cut = false;  // a turn starts beyond max_length: it and the rest are cut off
    for (const auto& [b, e] : rendered.assistant_spans) {
      const size_t first = token_at(t, rendered.text, ex.ids, b, false);
      if (o.max_length > 0 && first >= static_cast<size_t>(o.max_length)) {
        past_the_cut = true;
        break;
      }
      const size_t last = token_at(t, rendered.text, ex.ids, e, true);
      for (size_t i = first; i < last; ++i) assistant[i] = 1;
    }
    SNUG_CHECK(past_the_cut || std::find(assistant.begin(), assistant.end(), 1) != assistant.end(),
               where,
               ": --assistant-only-loss: the conversation has no assistant turn to train on");
    for (size_t i = 0; i < keep.size(); ++i) keep[i] &= assistant[i];
  }
  ex.labels.resize(ex.ids.size());
  for (size_t i = 0; i < ex.ids.size(); ++i) ex.labels[i] = keep[i] ? ex.ids[i] : kIgnoreIndex;
  return ex;
}

bool is_jsonl_spec(const std::string& spec) {
  std::error_code ec;
  return ends_with_nonempty(spec, ".jsonl") || fs::is_directory(spec, ec);
}

SftData load_sft_data(const std::string& path, const ModelTokenizer& tok, const SftOptions& o,
                      int64_t max_length) {
  std::error_code ec;
  std::vector<std::string> files;
  if (fs::is_directory(path, ec)) {
    for (const auto& e : fs::directory_iterator(path, ec))
      if (e.is_regular_file() && ends_with_nonempty(e.path().filename().string(), ".jsonl"))
        files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    SNUG_CHECK(!files.empty(), "--data ", path, ": the folder holds no .jsonl file");
  } else {
    files.push_back(path);
  }
  SftData d;
  SftOptions cut = o;
  cut.max_length = max_length;
  int64_t tokens = 0;
  for (const std::string& f : files) {
    const std::string text = read_input_file(f, "jsonl data '" + f + "'", int64_t{1} << 34);
    size_t pos = 0;
    int64_t line_no = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      std::string_view line(text.data() + pos, end - pos);
      pos = end + 1;
      ++line_no;
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
      const std::string where = detail::concat(f, ":", line_no);
      Example ex = tokenize_record(parse_sft_record(line, where), tok, cut, where);
      ++d.records;
      if (max_length > 0 && static_cast<int64_t>(ex.ids.size()) > max_length) {
        ex.ids.resize(static_cast<size_t>(max_length));
        ex.labels.resize(static_cast<size_t>(max_length));
      }
      if (std::all_of(ex.labels.begin(), ex.labels.end(),
                      [](int32_t l) { return l == kIgnoreIndex; })) {
        ++d.dropped;
        continue;
      }
      tokens += static_cast<int64_t>(ex.ids.size());
      d.examples.push_back(std::move(ex));
    }
  }
  SNUG_CHECK(!d.examples.empty(), "jsonl data ", path, ": no example to train on (", d.records,
             " records", d.dropped > 0 ? ", every one left without a label by truncation" : "",
             ")");
  d.describe = detail::concat("jsonl ", path, " (", d.records, " records, ", d.examples.size(),
                              " examples, ", tokens, " tokens)");
  return d;
}

}  // namespace snug

// Chat templates (data/chat_template.h) and jsonl records (data/sft_data.h) against transformers'
// apply_chat_template and TRL's SFTTrainer preprocessing: tests/golden/gen_chat_golden.py wrote
// tests/fixtures/chat/ (the tokenizer, every template snug knows, and TRL's ids and labels).
#include "data/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/sft_data.h"
#include "io/fnv1a.h"
#include "io/json_input.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace snug {
namespace {
namespace chat_template_test {

using nlohmann::json;
using testing_data::error_message;
using testing_data::HasSubstr;

const std::string kDir = std::string(SNUG_TEST_DATA_DIR) + "/chat/";

json expected() {
  return json::parse(read_input_file(kDir + "expected.json", "expected.json"));
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A model folder: the fixture tokenizer with `entry`'s special tokens and chat template.
void make_folder(const testing_data::TempDir& dir, const json& entry) {
  write(dir.file("tokenizer.json"), read_input_file(kDir + "tokenizer.json", "tokenizer.json"));
  json config = {{"chat_template", entry["template"]},
                 {"tokenizer_class", "PreTrainedTokenizerFast"}};
  config["bos_token"] = entry["bos_token"];
  config["eos_token"] = entry["eos_token"];
  write(dir.file("tokenizer_config.json"), config.dump(1));
}

std::vector<ChatMessage> messages(const json& j) {
  std::vector<ChatMessage> m;
  for (const json& x : j) m.push_back({x["role"], x["content"]});
  return m;
}

TEST(ChatTemplate, EveryKnownTemplateHasAFixture) {
  const json e = expected();
  std::vector<std::string> names;
  for (const json& t : e["templates"]) names.push_back(t["name"]);
  EXPECT_EQ(names, ChatTemplate::known_names());
}

TEST(ChatTemplate, RecognisesEachTemplateByItsExactText) {
  const json e = expected();
  size_t n = 0;
  for (const json& t : e["templates"]) {
    const std::string text = t["template"];
    EXPECT_EQ(hex64(fnv1a64(text)), t["fnv1a64"].get<std::string>()) << t["name"];
    EXPECT_EQ(ChatTemplate::recognise(text, "x").name(), t["name"].get<std::string>());
    // One byte more is another template: refused, naming the file.
    const std::string msg =
        error_message([&] { ChatTemplate::recognise(text + " ", "m/tc.json"); });
    EXPECT_TRUE(HasSubstr(msg, "m/tc.json: chat_template (FNV-1a 64 "));
    EXPECT_TRUE(HasSubstr(msg, "is not one snug knows"));
    ++n;
  }
  EXPECT_EQ(n, 9u);
}

TEST(ChatTemplate, RendersAsApplyChatTemplate) {
  const json e = expected();
  size_t rendered = 0;
  for (const json& t : e["templates"]) {
    const ChatTemplate tmpl = ChatTemplate::recognise(t["template"].get<std::string>(), "x");
    const std::string bos = t["bos_token"].is_null() ? "" : t["bos_token"].get<std::string>();
    const std::string eos = t["eos_token"].get<std::string>();
    for (const json& c : t["cases"]) {
      if (!c.contains("rendered")) continue;
      const auto m = messages(c["record"]["messages"]);
      EXPECT_EQ(tmpl.render(m, false, bos, eos).text, c["rendered"].get<std::string>())
          << t["name"];
      EXPECT_EQ(tmpl.render({m[0]}, true, bos, eos).text,
                c["rendered_generation_prompt"].get<std::string>())
          << t["name"];
      ++rendered;
    }
  }
  EXPECT_EQ(rendered, 18u);
}

TEST(SftData, IdsAndLabelsEqualTrlOnEveryRecord) {
  const json e = expected();
  size_t checked = 0, assistant_only = 0;
  for (const json& t : e["templates"]) {
    testing_data::TempDir dir;
    make_folder(dir, t);
    const ModelTokenizer tok = ModelTokenizer::load(dir.file(""));
    for (const json& c : t["cases"]) {
      const std::string line = c["record"].dump();
      const SftRecord r = parse_sft_record(line, "case");
      SftOptions o;
      o.completion_only_loss = c.value("completion_only_loss", true);
      const Example ex = tokenize_record(r, tok, o, "case");
      EXPECT_EQ(ex.ids, c["input_ids"].get<std::vector<int32_t>>()) << t["name"] << " " << line;
      EXPECT_EQ(ex.labels, c["labels"].get<std::vector<int32_t>>()) << t["name"] << " " << line;
      ++checked;
      if (c.contains("assistant_only_labels")) {
        o.assistant_only_loss = true;
        EXPECT_EQ(tokenize_record(r, tok, o, "case").labels,
                  c["assistant_only_labels"].get<std::vector<int32_t>>())
            << t["name"] << " " << line;
        ++assistant_only;
      }
    }
  }
  EXPECT_EQ(checked, 72u);
  EXPECT_EQ(assistant_only, 8u);  // llama3, qwen2.5, gemma, phi3: TRL's training variants
}

TEST(ChatTemplate, TemplateRefusalsNameTheTemplate) {
  const json e = expected();
  for (const json& t : e["templates"]) {
    const std::string name = t["name"];
    if (name != "mistral" && name != "gemma") continue;
    const ChatTemplate tmpl = ChatTemplate::recognise(t["template"].get<std::string>(), "x");
    EXPECT_TRUE(HasSubstr(error_message([&] {
                            tmpl.render({{"user", "a"}, {"user", "b"}}, false, "<s>", "</s>");
                          }),
                          "Conversation roles must alternate"));
    EXPECT_TRUE(HasSubstr(
        error_message([&] {
          tmpl.render({{"system", "a"}, {"user", "b"}}, false, "<s>", "</s>");
        }),
        name == "gemma" ? "System role not supported" : "Conversation roles must alternate"));
  }
}

TEST(ChatTemplate, PythonStripIsStrStrip) {
  EXPECT_EQ(python_strip(" \t\n\v\f\r a b \x1c"), "a b");
  EXPECT_EQ(python_strip("\xe3\x80\x80x\xc2\xa0"), "x");      // U+3000, U+00A0
  EXPECT_EQ(python_strip("\xe2\x80\x8bx"), "\xe2\x80\x8bx");  // U+200B is not a space
  EXPECT_EQ(python_strip("   "), "");
}

}  // namespace chat_template_test
}  // namespace
}  // namespace snug

// jsonl records (data/sft_data.h): every refusal names the file, the line and the field; the model
// folder's tokenizer files; truncation and dropping; and the batches made of the examples
// (data/batches.h): padding, TRL's best-fit-decreasing packing, length grouping, the eval split.
#include "data/sft_data.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "core/device.h"
#include "data/batches.h"
#include "data/prefetch.h"
#include "io/json_input.h"
#include "kernels/backends.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace snug {
namespace {
namespace sft_data_test {

using nlohmann::json;
using testing_data::error_message;
using testing_data::HasSubstr;
using testing_data::TempDir;

const std::string kChat = std::string(SNUG_TEST_DATA_DIR) + "/chat/";

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// The fixture tokenizer with ChatML (eos <|im_end|>) in a model folder.
std::string chatml_folder(const TempDir& dir, json extra = json::object()) {
  write(dir.file("tokenizer.json"), read_input_file(kChat + "tokenizer.json", "tokenizer.json"));
  const json e = json::parse(read_input_file(kChat + "expected.json", "expected.json"));
  json config = {{"eos_token", "<|im_end|>"}};
  for (const json& t : e["templates"])
    if (t["name"] == "chatml") config["chat_template"] = t["template"];
  config.update(extra);
  write(dir.file("tokenizer_config.json"), config.dump());
  return dir.file("");
}

std::string record_error(const std::string& line) {
  return error_message([&] { parse_sft_record(line, "d/x.jsonl:7"); });
}

TEST(SftRecord, EveryRefusalNamesFileLineAndField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"text": "a")", "d/x.jsonl:7"},
      {R"([1])", "d/x.jsonl:7: a record must be a JSON object"},
      {R"({"text": 1})", "d/x.jsonl:7: text: must be a string"},
      {R"({"id": 1})",
       "needs exactly one of \"text\", \"prompt\" + \"completion\" or \"messages\""},
      {R"({"text": "a", "messages": []})", "needs exactly one of"},
      {R"({"prompt": "a"})", "d/x.jsonl:7: completion: missing"},
      {R"({"completion": "a"})", "d/x.jsonl:7: prompt: missing"},
      {R"({"prompt": "a", "completion": []})", "completion: must be a string like the prompt"},
      {R"({"prompt": 3, "completion": "a"})", "prompt: must be a string or a list of messages"},
      {R"({"messages": {}})", "d/x.jsonl:7: messages: must be a list of messages"},
      {R"({"messages": []})", "messages: must hold at least one message"},
      {R"({"messages": ["hi"]})", "d/x.jsonl:7: messages[0]: a message must be an object"},
      {R"({"messages": [{"content": "a"}]})", "messages[0].role: missing or not a string"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "user"}]})",
       "d/x.jsonl:7: messages[1].content: missing or not a string"},
      {R"({"messages": [{"role": "tool", "content": "a"}]})",
       "messages[0].role: 'tool' is not one of system, user, assistant"},
      {R"({"messages": [{"role": "assistant", "content": "a", "tool_calls": []}]})",
       "messages[0].tool_calls: tool calls are not supported"},
      {R"({"prompt": [{"role": "user", "content": "a"}], "completion": [{"role": 1}]})",
       "d/x.jsonl:7: completion[0].role"},
      {R"({"text": "a", "tools": []})", "d/x.jsonl:7: tools: tool definitions are not supported"},
      {R"({"text": "a", "chat_template_kwargs": {}})", "chat_template_kwargs: template arguments"},
  };
  for (const auto& [line, part] : cases) EXPECT_TRUE(HasSubstr(record_error(line), part)) << line;
  // Other keys are ignored, as TRL ignores extra columns.
  EXPECT_EQ(parse_sft_record(R"({"text": "a", "id": 3})", "x").text, "a");
}

TEST(SftData, ReadsAFolderInNameOrderSkippingBlankLines) {
  TempDir model, data;
  const ModelTokenizer tok = ModelTokenizer::load(chatml_folder(model));
  std::filesystem::create_directories(data.file("d"));
  write(data.file("d/b.jsonl"), "{\"text\": \"second\"}\r\n\r\n");
  write(data.file("d/a.jsonl"), "\n{\"text\": \"first\"}\n  \n{\"text\": \"again\"}");
  write(data.file("d/notes.txt"), "not read");
  const SftData d = load_sft_data(data.file("d"), tok, {}, 0);
  ASSERT_EQ(d.examples.size(), 3u);
  EXPECT_EQ(d.records, 3);
  const std::string eos = "<|im_end|>";
  EXPECT_EQ(d.examples[0].ids, tok.tokenizer.encode("first" + eos));
  EXPECT_EQ(d.examples[1].ids, tok.tokenizer.encode("again" + eos));
  EXPECT_EQ(d.examples[2].ids, tok.tokenizer.encode("second" + eos));
  EXPECT_EQ(d.examples[0].labels, d.examples[0].ids);
  // A bad record in the second file: that file and its line.
  write(data.file("d/c.jsonl"), "{\"text\": \"ok\"}\n\n{\"messages\": [{\"role\": \"user\"}]}\n");
  EXPECT_TRUE(HasSubstr(error_message([&] { load_sft_data(data.file("d"), tok, {}, 0); }),
                        "d/c.jsonl:3: messages[0].content: missing or not a string"));
  std::filesystem::create_directories(data.file("empty"));
  EXPECT_TRUE(HasSubstr(error_message([&] { load_sft_data(data.file("empty"), tok, {}, 0); }),
                        "the folder holds no .jsonl file"));
}

TEST(SftData, TruncatesAndDropsExamplesLeftWithoutLabels) {
  TempDir model, data;
  const ModelTokenizer tok = ModelTokenizer::load(chatml_folder(model));
  const std::string long_prompt =
      R"({"prompt": "a long prompt that fills the row", "completion": "x"})";
  write(data.file("x.jsonl"), long_prompt + "\n{\"text\": \"short\"}\n");
  const SftData d = load_sft_data(data.file("x.jsonl"), tok, {}, 4);
  ASSERT_EQ(d.examples.size(), 1u);  // the prompt alone fills 4 tokens: no label left
  EXPECT_EQ(d.dropped, 1);
  std::vector<int32_t> cut = tok.tokenizer.encode("short<|im_end|>");  // 6 tokens, cut to 4
  cut.resize(4);
  EXPECT_EQ(d.examples[0].ids, cut);
  EXPECT_EQ(d.examples[0].labels, cut);
  write(data.file("y.jsonl"), long_prompt + "\n");
  EXPECT_TRUE(HasSubstr(error_message([&] { load_sft_data(data.file("y.jsonl"), tok, {}, 4); }),
                        "no example to train on (1 records, every one left without a label"));
}

TEST(SftData, AssistantOnlyLossNeedsAnAssistantTurn) {
  TempDir model;
  const ModelTokenizer tok = ModelTokenizer::load(chatml_folder(model));
  SftOptions o;
  o.assistant_only_loss = true;
  const SftRecord r =
      parse_sft_record(R"({"messages": [{"role": "user", "content": "hi"}]})", "f:2");
  EXPECT_TRUE(HasSubstr(error_message([&] { tokenize_record(r, tok, o, "f:2"); }),
                        "f:2: --assistant-only-loss: the conversation has no assistant turn"));
  // Text records are not conversations: the flag leaves them whole.
  const Example t = tokenize_record(parse_sft_record(R"({"text": "hi"})", "f"), tok, o, "f");
  EXPECT_EQ(t.labels, t.ids);
}

TEST(ModelTokenizer, ReadsTheFolderAsTransformersDoes) {
  TempDir model;
  // Special tokens as AddedToken objects; a list of named templates picks "default".
  const json e = json::parse(read_input_file(kChat + "expected.json", "expected.json"));
  std::string zephyr;
  for (const json& t : e["templates"])
    if (t["name"] == "zephyr") zephyr = t["template"];
  chatml_folder(model,
                {{"bos_token", {{"content", "<s>"}, {"special", true}}},
                 {"pad_token", nullptr},
                 {"chat_template", json::array({{{"name", "tool_use"}, {"template", "x"}},
                                                {{"name", "default"}, {"template", zephyr}}})}});
  ModelTokenizer tok = ModelTokenizer::load(model.file("tokenizer.json"));
  EXPECT_EQ(tok.bos_token, "<s>");
  EXPECT_EQ(tok.eos_token, "<|im_end|>");
  EXPECT_EQ(tok.pad_token, "");
  EXPECT_EQ(tok.pad_id(), *tok.tokenizer.token_to_id("<|im_end|>"));  // pad falls back to eos
  EXPECT_EQ(tok.chat_template().name(), "zephyr");
  // chat_template.jinja wins over the config.
  write(model.file("chat_template.jinja"), "{{ nonsense }}");
  const std::string msg =
      error_message([&] { ModelTokenizer::load(model.file("")).chat_template(); });
  EXPECT_TRUE(HasSubstr(msg, "chat_template.jinja: chat_template (FNV-1a 64 "));
  EXPECT_TRUE(HasSubstr(msg, "is not one snug knows"));
}

TEST(ModelTokenizer, RefusalsNameTheFile) {
  TempDir model;
  EXPECT_TRUE(HasSubstr(error_message([&] { ModelTokenizer::load(model.file("")); }),
                        "tokenizer.json does not exist"));
  chatml_folder(model, {{"eos_token", "<|not_a_token|>"}});
  EXPECT_TRUE(HasSubstr(error_message([&] { ModelTokenizer::load(model.file("")); }),
                        "tokenizer_config.json: eos_token '<|not_a_token|>' is not in the "
                        "vocabulary of "));
  chatml_folder(model, {{"chat_template", nullptr}});
  const ModelTokenizer tok = ModelTokenizer::load(model.file(""));
  const SftRecord r =
      parse_sft_record(R"({"messages": [{"role": "user", "content": "hi"}]})", "f:1");
  EXPECT_TRUE(HasSubstr(error_message([&] { tokenize_record(r, tok, {}, "f:1"); }),
                        "conversational records need a chat template"));
  chatml_folder(model, {{"chat_template", 3}});
  EXPECT_TRUE(HasSubstr(error_message([&] { ModelTokenizer::load(model.file("")); }),
                        "tokenizer_config.json: chat_template must be a string or a list"));
}

// Examples with ids 1.. and labels equal to the ids but the first `masked` of each.
std::vector<Example> examples(const std::vector<int>& lengths, int masked = 0) {
  std::vector<Example> out;
  int32_t next = 1;
  for (int n : lengths) {
    Example e;
    for (int i = 0; i < n; ++i) {
      e.ids.push_back(next);
      e.labels.push_back(i < masked ? kIgnoreIndex : next);
      ++next;
    }
    out.push_back(e);
  }
  return out;
}

TEST(ExampleLoader, PadsEachBatchToItsLongestRow) {
  const std::vector<Example> ex = examples({3, 5, 2}, 1);
  ExampleBatching how;
  how.shuffle = false;
  how.pad_id = 99;
  ExampleLoader l(ex, 2, 8, 0, how);
  std::vector<int32_t> in(16), tg(16);
  ASSERT_EQ(l.next_rows(2, in.data(), tg.data(), nullptr), 5);
  const int32_t x = kIgnoreIndex;
  EXPECT_EQ(std::vector<int32_t>(in.begin(), in.begin() + 10),
            (std::vector<int32_t>{1, 2, 3, 99, 99, 4, 5, 6, 7, 8}));
  // Targets are the next token's label; a document's last token and the padding predict
  // nothing (the masked first label of each example is never a target anyway).
  EXPECT_EQ(std::vector<int32_t>(tg.begin(), tg.begin() + 10),
            (std::vector<int32_t>{2, 3, x, x, x, 5, 6, 7, 8, x}));
  ASSERT_EQ(l.next_rows(1, in.data(), tg.data(), nullptr), 2);
  EXPECT_EQ(std::vector<int32_t>(in.begin(), in.begin() + 2), (std::vector<int32_t>{9, 10}));
  EXPECT_EQ(l.epoch(), 1);
  EXPECT_EQ(l.position(), 0);
}

TEST(ExampleLoader, PacksBestFitDecreasingAsTrl) {
  // TRL's documented example (max_length 4): [1..4], [6,7], [8,9,10], [11] packs into rows
  // [1,2,3,4], [8,9,10,11], [6,7] with seq_lengths [4], [3,1], [2].
  const std::vector<Example> ex = examples({4, 2, 3, 1});
  ExampleBatching how;
  how.shuffle = false;
  how.packing = true;
  ExampleLoader l(ex, 1, 4, 0, how);
  EXPECT_EQ(l.rows(), (std::vector<std::vector<int32_t>>{{0}, {2, 3}, {1}}));
  ASSERT_TRUE(l.has_positions());
  std::vector<int32_t> in(4), tg(4), pos(4);
  const int32_t x = kIgnoreIndex;
  l.next_rows(1, in.data(), tg.data(), pos.data());
  l.next_rows(1, in.data(), tg.data(), pos.data());
  EXPECT_EQ(in, (std::vector<int32_t>{7, 8, 9, 10}));
  EXPECT_EQ(tg, (std::vector<int32_t>{8, 9, x, x}));  // never across the documents' boundary
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 1, 2, 0}));
  l.next_rows(1, in.data(), tg.data(), pos.data());
  EXPECT_EQ(in, (std::vector<int32_t>{5, 6, 0, 0}));  // the row's tail is padding
  EXPECT_EQ(tg, (std::vector<int32_t>{6, x, x, x}));
  EXPECT_EQ(pos, (std::vector<int32_t>{0, 1, 0, 1}));
}

TEST(ExampleLoader, GroupsByLengthLongestFirstWithinMegabatches) {
  std::vector<int> lengths(30);
  std::iota(lengths.begin(), lengths.end(), 1);
  const std::vector<Example> ex = examples(lengths);
  ExampleBatching how;
  how.group_by_length = true;
  ExampleLoader l(ex, 1, 64, 7, how);  // megabatches of 50 rows: one, sorted
  for (int64_t p = 0; p < 30; ++p) EXPECT_EQ(l.row_at(p), 29 - p);
  how.group_by_length = false;
  ExampleLoader shuffled(ex, 1, 64, 7, how);
  bool differs = false;
  for (int64_t p = 0; p < 30; ++p) differs |= shuffled.row_at(p) != 29 - p;
  EXPECT_TRUE(differs);
  // A new order per epoch, and seek restores it.
  std::vector<int32_t> in(64);
  for (int i = 0; i < 30; ++i) shuffled.next_rows(1, in.data(), nullptr, nullptr);
  const int64_t first = shuffled.row_at(0);
  ExampleLoader again(ex, 1, 64, 7, how);
  again.seek(1, 0);
  EXPECT_EQ(again.row_at(0), first);
}

TEST(ExampleLoader, PrefetchedBatchesAreTheSynchronousOnes) {
  std::vector<int> lengths;
  for (int i = 0; i < 40; ++i) lengths.push_back(1 + (i * 7) % 13);
  const std::vector<Example> ex = examples(lengths, 1);
  for (const bool packing : {false, true}) {
    ExampleBatching how;
    how.packing = packing;
    ExampleLoader sync(ex, 3, 16, 5, how), async_loader(ex, 3, 16, 5, how);
    Device dev(cpu_backend());
    Prefetcher p(async_loader, 2, 2, dev);
    for (int b = 0; b < 12; ++b) {  // more than an epoch
      std::vector<int32_t> in1(48, -7), tg1(48, -7), pos1(48, -7);
      std::vector<int32_t> in2(48, -7), tg2(48, -7), pos2(48, -7);
      const int64_t c1 = sync.next_rows(3, in1.data(), tg1.data(), pos1.data());
      const int64_t c2 = p.next(in2.data(), tg2.data(), pos2.data());
      ASSERT_EQ(c1, c2) << b;
      EXPECT_EQ(in1, in2) << b;
      EXPECT_EQ(tg1, tg2) << b;
      EXPECT_EQ(pos1, pos2) << b;
      if (packing) {
        EXPECT_EQ(c1, 16);
      }
    }
  }
}

TEST(OpenData, SplitsAStreamAndJsonlForEvaluation) {
  DataOptions o;
  o.data = "builtin";
  o.vocab_size = 256;
  o.eval_split = 0.25;
  OpenedData d = open_data(o);
  const auto& train = dynamic_cast<const TokenStreamData&>(*d.train).source();
  const auto& eval = dynamic_cast<const TokenStreamData&>(*d.eval).source();
  EXPECT_EQ(train.size() + eval.size(), open_dataset("builtin", 256, 0)->size());
  EXPECT_EQ(eval.size(), (open_dataset("builtin", 256, 0)->size() + 3) / 4);

  TempDir model, data;
  o.tokenizer = chatml_folder(model);
  o.vocab_size = 1000;
  std::string lines;
  for (int i = 0; i < 10; ++i) lines += "{\"text\": \"record " + std::to_string(i) + "\"}\n";
  write(data.file("x.jsonl"), lines);
  o.data = data.file("x.jsonl");
  o.eval_split = 0.15;  // ceil(1.5) = 2 examples
  d = open_data(o);
  EXPECT_EQ(dynamic_cast<const ExampleData&>(*d.train).examples().size(), 8u);
  EXPECT_EQ(dynamic_cast<const ExampleData&>(*d.eval).examples().size(), 2u);

  o.eval_split = 0;
  o.packing = true;
  o.data = "builtin";
  EXPECT_TRUE(HasSubstr(error_message([&] { open_data(o); }),
                        "--packing applies to jsonl data (records of examples); --data builtin"));
  o.packing = false;
  o.data = data.file("x.jsonl");
  o.tokenizer = "";
  EXPECT_TRUE(HasSubstr(error_message([&] { open_data(o); }),
                        "jsonl records need a tokenizer: pass --tokenizer"));
  o.tokenizer = model.file("");
  o.vocab_size = 100;
  EXPECT_TRUE(
      HasSubstr(error_message([&] { open_data(o); }), "is outside the model's vocabulary (100)"));
}

}  // namespace sft_data_test
}  // namespace
}  // namespace snug

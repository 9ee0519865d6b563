// `snug train` on jsonl records with a model folder's tokenizer: the flags of issue 18's data and
// evaluation parts reach the run (eval lines in the log, eval_loss and perplexity in the report),
// and bad input is one message naming the file, line and field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/json_input.h"
#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace sft_cli_test {

using ::testing::HasSubstr;

const std::string kChat = std::string(SNUG_TEST_DATA_DIR) + "/chat/";

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A model folder: config.json (a small GPT-2 over the fixture tokenizer's 918 ids), the
// tokenizer and a ChatML tokenizer_config.json.
std::string model_folder(const TempDir& tmp) {
  const std::string dir = tmp.path("");
  write(tmp.path("config.json"),
        R"({"model_type": "gpt2", "vocab_size": 1024, "n_positions": 128, "n_embd": 32,
            "n_layer": 1, "n_head": 2})");
  write(tmp.path("tokenizer.json"), read_input_file(kChat + "tokenizer.json", "tokenizer.json"));
  const nlohmann::json e =
      nlohmann::json::parse(read_input_file(kChat + "expected.json", "expected.json"));
  nlohmann::json config = {{"eos_token", "<|im_end|>"}};
  for (const auto& t : e["templates"])
    if (t["name"] == "chatml") config["chat_template"] = t["template"];
  write(tmp.path("tokenizer_config.json"), config.dump());
  return dir;
}

std::string records() {
  std::string s;
  for (int i = 0; i < 12; ++i) {
    s += "{\"text\": \"The cat sat on mat number " + std::to_string(i) + ".\"}\n";
    s += R"({"prompt": "Q: colour? A:", "completion": " blue"})"
         "\n";
    s +=
        R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello there!"}]})"
        "\n";
  }
  return s;
}

// --model names the folder: its config.json and its tokenizer.json.
TEST(SftCli, TrainsOnJsonlWithEvaluationInTheLogAndReport) {
  TempDir tmp;
  const std::string model = model_folder(tmp);
  write(tmp.path("data.jsonl"), records());
  const std::string report = tmp.path("r.json");
  const CliResult r = run_snug(
      "train --model " + model + " --data " + tmp.path("data.jsonl") +
          " --max-length 48 --per-device-train-batch-size 4 --max-steps 4 --eval-split 0.25 "
          "--eval-steps 2 --per-device-eval-batch-size 3 --group-by-length --assistant-only-loss "
          "--completion-only-loss false --report-json " +
          report,
      120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("jsonl " + tmp.path("data.jsonl") + " (27 training examples)"));
  EXPECT_THAT(r.out, HasSubstr("evaluating on jsonl " + tmp.path("data.jsonl") +
                               " (9 eval examples, --eval-split) every 2 steps"));
  EXPECT_THAT(r.out, HasSubstr("eval step 2  eval_loss "));
  EXPECT_THAT(r.out, HasSubstr("eval step 4  eval_loss "));
  const nlohmann::json j = read_json(report);
  ASSERT_TRUE(j.contains("eval_loss")) << j.dump();
  EXPECT_GT(j["eval_loss"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j["perplexity"].get<double>(), std::exp(j["eval_loss"].get<double>()));
  EXPECT_EQ(j["eval_history"].size(), 2u);
  EXPECT_EQ(j["config"]["seq_len"], 48);
  EXPECT_EQ(j["config"]["completion_only_loss"], false);
  EXPECT_EQ(j["config"]["assistant_only_loss"], true);
  EXPECT_EQ(j["config"]["group_by_length"], true);
  EXPECT_EQ(j["config"]["eval_split"], 0.25);
}

TEST(SftCli, TokenizerFlagAndEvalDataFile) {
  TempDir tmp, data;
  model_folder(tmp);
  write(data.path("train.jsonl"), records());
  write(data.path("eval.jsonl"), R"({"text": "The cat sat."})"
                                 "\n"
                                 R"({"text": "A mat."})"
                                 "\n");
  const std::string report = data.path("r.json");
  const CliResult r =
      run_snug("train --model gpt2-tiny --vocab-size 1024 --n-layer 1 --tokenizer " + tmp.path("") +
                   " --data " + data.path("train.jsonl") + " --eval-data " +
                   data.path("eval.jsonl") + " --seq-len 32 --max-steps 2 --report-json " + report,
               120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("evaluating on jsonl " + data.path("eval.jsonl") +
                               " (2 records, 2 examples, "));
  EXPECT_THAT(r.out, HasSubstr(" at the end\n"));
  EXPECT_THAT(r.out, HasSubstr("eval step 2  eval_loss "));
  const nlohmann::json j = read_json(report);
  EXPECT_EQ(j["eval_history"].size(), 1u);
  EXPECT_EQ(j["eval_history"][0]["eval_samples"], 2);
  EXPECT_EQ(j["config"]["tokenizer"], tmp.path(""));
}

TEST(SftCli, BadInputIsOneMessageNamingWhere) {
  TempDir tmp;
  model_folder(tmp);
  write(tmp.path("data.jsonl"), records() + R"({"messages": [{"role": "user", "content": 7}]})"
                                            "\n");
  CliResult r = run_snug("train --model " + tmp.path("config.json") + " --data " +
                             tmp.path("data.jsonl") + " --max-steps 1",
                         60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(tmp.path("data.jsonl") + ":37: messages[0].content: missing or "
                                                        "not a string"));
  write(tmp.path("data.jsonl"), records());
  r = run_snug("train --model " + tmp.path("config.json") + " --data " + tmp.path("data.jsonl") +
                   " --max-steps 1 --packing",
               60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--packing: "));
  EXPECT_THAT(r.err, HasSubstr("has learned positions"));
  r = run_snug("export-init --data " + tmp.path("data.jsonl") + " --max-steps 1 --batches-out " +
                   tmp.path("b.tok"),
               60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--batches-out: --data " + tmp.path("data.jsonl") +
                               " is jsonl records; only token streams"));
  r = run_snug("train --model " + tmp.path("none") + " --max-steps 1", 60);
  EXPECT_EQ(r.exit_code, 1);
  std::filesystem::create_directories(tmp.path("empty"));
  r = run_snug("train --model " + tmp.path("empty") + " --max-steps 1", 60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("model folder " + tmp.path("empty") + " has no config.json"));
  r = run_snug("train --data " + tmp.path("data.jsonl") + " --max-steps 1", 60);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("jsonl records need a tokenizer: pass --tokenizer"));
}

}  // namespace sft_cli_test
}  // namespace
}  // namespace snug::test

// No hang on a crafted input (issue 29, item 2): the work of a tokenizer.json Split regex is
// bounded per text, WordPiece is linear in the word, and --prompts must be a regular file. Each
// runs under a timeout, so that a regression fails (exit 124) instead of stalling the suite.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace bounded_work_cli_test {

using ::testing::HasSubstr;

std::string tokenizer_fixture(const std::string& name) {
  return std::string(SNUG_TEST_DATA_DIR) + "/tokenizers/" + name;
}

// Item 2: a Split regex that stays under PCRE2's per-match limit at each of 66000 start positions
// took minutes; the work is bounded per text, and the text is refused naming the pattern.
TEST(HostileRoundTwoCli, BacktrackingSplitRegexIsBoundedPerText) {
  TempDir tmp;
  nlohmann::json j = nlohmann::json::parse(slurp(tokenizer_fixture("gpt2_style.json")));
  j["pre_tokenizer"] = {{"type", "Split"},
                        {"pattern", {{"Regex", "(a|aa)*c|a"}}},
                        {"behavior", "Isolated"},
                        {"invert", false}};
  const std::string tok = tmp.path("tokenizer.json");
  write_file(tok, j.dump());
  // Runs of 30 a's: (a|aa)*c tries Fibonacci(30) ways at each start, about a million steps, under
  // the per-match limit; 66000 bytes of them were minutes of matching.
  std::string runs;
  while (runs.size() < 66000) runs += std::string(30, 'a') + " ";
  runs.resize(66000);
  const std::string text = tmp.path("a.txt");
  write_file(text, runs);
  const CliResult r = run_snug("tokenize --ids-only --tokenizer " + tok + " --file " + text, 60);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("pre_tokenizer.pattern.Regex: the pattern backtracks"));
  EXPECT_THAT(r.err, HasSubstr("the pattern backtracks too much: more than 142000000 regex steps "
                               "splitting a text of 66000 bytes"));
  // A short text still splits.
  write_file(text, "aaaa");
  const CliResult ok = run_snug("tokenize --ids-only --tokenizer " + tok + " --file " + text, 60);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

// Item 2: WordPiece under max_input_chars_per_word 1e12 was cubic in the word (20000
// characters > 60 s); the longest match is now a walk of a trie.
TEST(HostileRoundTwoCli, LongWordPieceWordIsLinear) {
  TempDir tmp;
  nlohmann::json j = nlohmann::json::parse(slurp(tokenizer_fixture("bert_wordpiece.json")));
  j["model"]["max_input_chars_per_word"] = 1000000000000;
  const std::string tok = tmp.path("tokenizer.json");
  write_file(tok, j.dump());
  const std::string text = tmp.path("a.txt");
  write_file(text, std::string(20000, 'a'));
  const CliResult r = run_snug("tokenize --ids-only --tokenizer " + tok + " --file " + text, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // [CLS], "a", 19999 x "##a", [SEP]
  const auto& v = j["model"]["vocab"];
  std::string want =
      std::to_string(v["[CLS]"].get<int>()) + " " + std::to_string(v["a"].get<int>());
  for (int i = 1; i < 20000; ++i) want += " " + std::to_string(v["##a"].get<int>());
  want += " " + std::to_string(v["[SEP]"].get<int>()) + "\n";
  EXPECT_EQ(r.out, want);
}

// Item 2: `generate --prompts` on a FIFO blocked forever, on /dev/zero it read until memory ran
// out; the prompts are a regular file like every other input.
TEST(HostileRoundTwoCli, PromptsMustBeARegularFile) {
  TempDir tmp;
  const std::string fifo = tmp.path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& p : {fifo, std::string("/dev/zero")}) {
    const CliResult r = run_snug("generate --max-new-tokens 1 --prompts " + p, 60);
    EXPECT_EQ(r.exit_code, 1) << p << ": " << r.err;
    EXPECT_EQ(r.err, "snug: error: snug generate: --prompts '" + p + "': not a regular file\n")
        << p;
  }
}

// Item 2: --assistant-only-loss re-encoded the text before each assistant turn: quadratic in the
// turns (3000 turns took 83 s; 8000 here take minutes). Turns past the --max-length cut are not
// mapped.
TEST(HostileRoundTwoCli, ManyTurnsWithAssistantOnlyLossAreBoundedByTheCut) {
  TempDir tmp;
  const std::string chat = std::string(SNUG_TEST_DATA_DIR) + "/chat/";
  write_file(tmp.path("config.json"),
             R"({"model_type": "gpt2", "vocab_size": 1024, "n_positions": 128, "n_embd": 32,
                 "n_layer": 1, "n_head": 2})");
  write_file(tmp.path("tokenizer.json"), slurp(chat + "tokenizer.json"));
  nlohmann::json config = {{"eos_token", "<|im_end|>"}};
  const nlohmann::json expected = nlohmann::json::parse(slurp(chat + "expected.json"));
  for (const auto& t : expected["templates"])
    if (t["name"] == "chatml") config["chat_template"] = t["template"];
  write_file(tmp.path("tokenizer_config.json"), config.dump());
  nlohmann::json messages = nlohmann::json::array();
  for (int i = 0; i < 8000; ++i) {
    messages.push_back({{"role", "user"}, {"content", "Hi " + std::to_string(i)}});
    messages.push_back({{"role", "assistant"}, {"content", "Hello there!"}});
  }
  write_file(tmp.path("data.jsonl"), nlohmann::json{{"messages", messages}}.dump() + "\n");
  const CliResult r =
      run_snug("train --model " + tmp.path("") + " --data " + tmp.path("data.jsonl") +
                   " --max-length 64 --per-device-train-batch-size 1 --max-steps 1 "
                   "--assistant-only-loss --threads 1",
               60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// Item 2: building a model checked each parameter name against every earlier one: plan --n-layer
// 8000 took 198 s (quadratic in layers). The flag is bounded now (1024); a config.json key can
// still ask for 8000 layers, which the parameter index builds in linear time. The kill guard is
// 180 s: linear takes 5.4 s in release and 24-43 s under ASan+UBSan on an idle 2-core host (61 s,
// and a kill at the old 60 s guard, with two builds beside it); quadratic took 198 s in release.
// With the AdaLOMO and LOMO what-if rows (12 dry runs after the plan's), 9.1 s in release and
// 52 s under ASan+UBSan on a 2-core Zen 4 host; before AdaLOMO found its state by a map, its row
// alone was quadratic again (41 s in release, 114 s under the sanitizers).
TEST(HostileRoundTwoCli, ManyLayersPlanWithoutQuadraticSetup) {
  const CliResult r = run_snug("plan --config-override n_layer=8000", 180);
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace bounded_work_cli_test
}  // namespace
}  // namespace snug::test

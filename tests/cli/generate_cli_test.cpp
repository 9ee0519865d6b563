// `snug generate` as a user runs it: after `snug train`, from the run's checkpoint (bytes, the
// built-in corpus' tokenizer), and from a model folder with a tokenizer.json (the golden GPT-2 of
// tests/fixtures/generate with a tokenizer written here), where its greedy tokens equal the
// library's (and so transformers'); the streamed text, tokens/s and the memory table with kv_cache;
// every bad request one clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/run_cli.h"

namespace snug {
namespace {
namespace generate_cli_test {

using test::run_snug;
using test::TempDir;

TEST(GenerateCli, FromATrainedCheckpointStreamsTextAndReportsMemory) {
  TempDir tmp;
  const std::string out = tmp.path("run");
  auto t = run_snug(
      "train --max-steps 4 --per-device-train-batch-size 2 --seq-len 32 --threads 1 "
      "--save-steps 4 --output-dir " +
          out,
      300);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  auto g = run_snug(
      "generate --checkpoint " + out + " --prompt 'Once upon' --max-new-tokens 12 --threads 1",
      120);
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(g.out.rfind("Once upon", 0), 0u) << g.out;
  EXPECT_NE(g.err.find("12 new tokens"), std::string::npos) << g.err;
  EXPECT_NE(g.err.find("tokens/s"), std::string::npos) << g.err;
  EXPECT_NE(g.err.find("kv_cache"), std::string::npos) << g.err;
  EXPECT_NE(g.err.find("checkpoint-4"), std::string::npos) << g.err;
  // Beam search and sampling run too; one prompt per line of --prompts.
  std::ofstream(tmp.path("p.txt")) << "Hello\n\nThe end\n";
  g = run_snug("generate --checkpoint " + out + " --prompts " + tmp.path("p.txt") +
                   " --max-new-tokens 5 --num-beams 3 --threads 1",
               120);
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.out.find("Hello"), std::string::npos);
  EXPECT_NE(g.out.find("The end"), std::string::npos);
  EXPECT_NE(g.err.find("10 tokens in"), std::string::npos) << g.err;
  g = run_snug("generate --checkpoint " + out +
                   " --prompt x --max-new-tokens 5 --do-sample --top-p 0.9 --temperature 0.7",
               120);
  EXPECT_EQ(g.exit_code, 0) << g.err;
}

TEST(GenerateCli, ModelFolderWithTokenizerStopsAtItsEos) {
  // The golden GPT-2 (vocabulary 97) with a WordPiece tokenizer of whole words: "t<i>" is id i,
  // eos "t31".
  TempDir tmp;
  const std::string src = std::string(SNUG_TEST_DATA_DIR) + "/generate/gpt2";
  const std::string dir = tmp.path("model");
  std::filesystem::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    std::filesystem::copy_file(src + "/" + f, dir + "/" + f);
  std::string vocab;
  for (int i = 0; i < 97; ++i)
    vocab += (i ? "," : "") + ("\"t" + std::to_string(i)) + "\":" + std::to_string(i);
  std::ofstream(dir + "/tokenizer.json")
      << R"({"version":"1.0","added_tokens":[],"normalizer":null,)"
      << R"("pre_tokenizer":{"type":"BertPreTokenizer"},"post_processor":null,)"
      << R"("decoder":{"type":"WordPiece","prefix":"##","cleanup":false},)"
      << R"("model":{"type":"WordPiece","unk_token":"t0","continuing_subword_prefix":"##",)"
      << R"("max_input_chars_per_word":100,"vocab":{)" << vocab << "}}}";
  std::ofstream(dir + "/tokenizer_config.json") << R"({"eos_token":"t31"})";
  // tests/fixtures/generate/gpt2/expected.json, case greedy_eos: 8 tokens ending in eos 31.
  auto g = run_snug("generate --model " + dir +
                        " --prompt 't72 t36 t55 t90 t41 t81 t17 t83 t67' --max-new-tokens 24",
                    120);
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_NE(g.err.find("8 new tokens (stopped at eos)"), std::string::npos) << g.err;
  EXPECT_NE(g.out.find("t64 t64 t64 t64 t64 t64 t64 t31"), std::string::npos) << g.out;
}

// `snug generate --report-json` reports the run's memory as training does, and its peak is what
// `snug plan --inference` predicts for the same model and shape (one prompt of 8 byte tokens, 6
// new ones, greedy and 2 beams, fp32 and bf16), to the byte.
TEST(GenerateCli, ReportJsonPeakEqualsPlanInference) {
  TempDir tmp;
  int i = 0;
  for (const std::string flags :
       {"--model llama-tiny --num-beams 1", "--model llama-tiny --num-beams 2",
        "--model gpt2-tiny --bf16 --num-beams 1"}) {
    SCOPED_TRACE(flags);
    const std::string gen = tmp.path("gen" + std::to_string(i) + ".json"),
                      plan = tmp.path("plan" + std::to_string(i++) + ".json");
    const auto g = run_snug("generate " + flags +
                                " --prompt abcdefgh --max-new-tokens 6 "
                                "--report-json " +
                                gen,
                            120);
    ASSERT_EQ(g.exit_code, 0) << g.err;
    const auto p = run_snug("plan --inference " + flags +
                                " --per-device-eval-batch-size 1 "
                                "--seq-len 14 --max-new-tokens 6 --json " +
                                plan,
                            120);
    ASSERT_EQ(p.exit_code, 0) << p.err;
    const nlohmann::json gj = test::read_json(gen), pj = test::read_json(plan);
    ASSERT_EQ(gj["generation"]["prompts"].size(), 1u);
    EXPECT_EQ(gj["generation"]["prompts"][0]["prompt_tokens"], 8);
    EXPECT_EQ(gj["generation"]["prompts"][0]["new_tokens"], 6);
    EXPECT_EQ(gj["generation"]["prompts"][0]["kv_cache_bytes"], pj["inference"]["kv_cache_bytes"]);
    EXPECT_EQ(gj["memory"]["peak_bytes"], pj["memory"]["peak_bytes"]);
    EXPECT_EQ(gj["memory"]["max_by_category"], pj["memory"]["max_by_category"]);
    EXPECT_GT(gj["generation"]["tokens_per_second"].get<double>(), 0.0);
  }
}

TEST(GenerateCli, BadRequestsAreClearErrors) {
  auto e = run_snug("generate --max-new-tokens 4", 60);
  EXPECT_NE(e.exit_code, 0);
  EXPECT_NE(e.err.find("exactly one of --prompt and --prompts"), std::string::npos) << e.err;
  e = run_snug("generate --prompt a --early-stopping maybe", 60);
  EXPECT_NE(e.err.find("--early-stopping must be true, false or never"), std::string::npos)
      << e.err;
  e = run_snug("generate --prompt a --stop xyz", 60);
  EXPECT_NE(e.err.find("--stop 'xyz' is not a token"), std::string::npos) << e.err;
  e = run_snug("generate --prompt a --top-p 2", 60);
  EXPECT_NE(e.err.find("--top-p"), std::string::npos) << e.err;
  e = run_snug("generate --prompts /nonexistent/p.txt", 60);
  EXPECT_NE(e.err.find("--prompts '/nonexistent/p.txt': cannot open"), std::string::npos) << e.err;
}

}  // namespace generate_cli_test
}  // namespace
}  // namespace snug

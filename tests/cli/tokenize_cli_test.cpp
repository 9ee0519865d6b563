// `snug tokenize`: the ids the library gives (themselves held to the tokenizers package in
// tests/data/tokenizer_json_test.cpp), printed and decoded back; bad input is one message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "data/tokenizer_json.h"
#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace tokenize_cli_test {

using ::testing::HasSubstr;

const std::string kTok = std::string(SNUG_TEST_DATA_DIR) + "/tokenizers/llama3_style.json";

// docs/tokenizers.md's example, as written there, on the repository's tokenizer.
TEST(TokenizeCli, TheDocsExampleDecodesWithTheRepositoryTokenizer) {
  const std::string tok =
      std::string(SNUG_TEST_DATA_DIR) + "/../../examples/tiny-llama/tokenizer.json";
  const CliResult enc =
      run_snug("tokenize --tokenizer " + tok + " --text '안녕하세요 world' --ids-only");
  ASSERT_EQ(enc.exit_code, 0) << enc.err;
  EXPECT_EQ(enc.out, "416 233 170 230 246 272 727 497 223 89 297 78 70\n");
  const CliResult dec =
      run_snug("tokenize --tokenizer " + tok +
               " --decode --text '416 233 170 230 246 272 727 497 223 89 297 78 70'");
  ASSERT_EQ(dec.exit_code, 0) << dec.err;
  EXPECT_THAT(dec.out, HasSubstr("안녕하세요 world"));
}

TEST(TokenizeCli, PrintsTheLibraryIdsAndDecodesThemBack) {
  const std::string text = "안녕하세요 world<|im_end|> 12345\n";
  TempDir tmp;
  const std::string file = tmp.path("in.txt");
  std::ofstream(file, std::ios::binary) << text;
  const std::vector<int32_t> ids = JsonTokenizer::load(kTok).encode(text);
  std::string line;
  for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);

  const CliResult r = run_snug("tokenize --tokenizer " + kTok + " --file " + file + " --ids-only");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, line + "\n");

  const CliResult pieces = run_snug("tokenize --tokenizer " + kTok + " --file " + file);
  ASSERT_EQ(pieces.exit_code, 0) << pieces.err;
  EXPECT_THAT(pieces.out, HasSubstr("2\t<|im_end|>\n"));
  EXPECT_THAT(pieces.out, HasSubstr(std::to_string(ids.size()) + " tokens, " +
                                    std::to_string(text.size()) + " bytes"));

  const CliResult back =
      run_snug("tokenize --tokenizer " + kTok + " --decode --text '" + line + "'");
  ASSERT_EQ(back.exit_code, 0) << back.err;
  EXPECT_EQ(back.out, text + "\n");
}

TEST(TokenizeCli, BadIdsAndBadFilesAreOneMessage) {
  CliResult r = run_snug("tokenize --tokenizer " + kTok + " --decode --text '1 2 x'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("'x' at byte 4 is not a token id"));
  r = run_snug("tokenize --tokenizer " + kTok + " --decode --text '1 99999'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("id 99999 at position 1"));
  TempDir tmp;
  const std::string bad = tmp.path("tokenizer.json");
  std::ofstream(bad) << R"({"model": {"type": "Unigram"}})";
  r = run_snug("tokenize --tokenizer " + bad + " --text hi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("tokenizer.json"));
  r = run_snug("tokenize --tokenizer " + kTok);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("give --text or --file"));
}

}  // namespace tokenize_cli_test
}  // namespace
}  // namespace snug::test

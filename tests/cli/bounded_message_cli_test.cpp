// Messages that echoed megabytes (issue 29, item 6): every message quotes a bounded excerpt of
// the input, and a NUL in a shard name gets a reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "support/run_cli.h"

namespace snug::test {
namespace {

using ::testing::HasSubstr;

std::string tokenizer_fixture(const std::string& name) {
  return std::string(SNUG_TEST_DATA_DIR) + "/tokenizers/" + name;
}

// Item 6: a 10 MB jsonl line with a bad byte gave a 10 MB message (the JSON library's "last
// read"), a megabyte duplicate key was echoed whole, and a NUL in a shard name cut the path.
TEST(HostileRoundTwoCli, MessagesQuoteABoundedExcerpt) {
  TempDir tmp;
  const std::string data = tmp.path("big.jsonl");
  const std::string tok = " --tokenizer " + tokenizer_fixture("gpt2_style.json");
  write_file(data, "{\"text\": \"" + std::string(10 << 20, 'a') + "\xff\"}\n");
  CliResult r = run_snug("train --max-steps 1 --seq-len 16 --data " + data + tok, 120);
  EXPECT_EQ(r.exit_code, 1) << r.err.substr(0, 2000);
  EXPECT_THAT(r.err, HasSubstr(data));
  EXPECT_LT(r.err.size(), 2000u) << r.err.substr(0, 2000);
  const std::string key(1 << 20, 'k');
  write_file(data, "{\"" + key + "\": 1, \"" + key + "\": 2}\n");
  r = run_snug("train --max-steps 1 --seq-len 16 --data " + data + tok, 120);
  EXPECT_EQ(r.exit_code, 1) << r.err.substr(0, 2000);
  EXPECT_THAT(r.err,
              HasSubstr("duplicate JSON key '" + std::string(64, 'k') + "... (1048576 bytes)'"));
  EXPECT_LT(r.err.size(), 2000u) << r.err.substr(0, 2000);

  const std::string dir = tmp.path("model");
  ASSERT_EQ(run_snug("export-init -o " + dir, 60).exit_code, 0);
  write_file(
      dir + "/model.safetensors.index.json",
      R"({"metadata": {}, "weight_map": {"lm_head.weight": "model-\u0000-of-2.safetensors"}})");
  r = run_snug("train --max-steps 1 --model " + dir, 60);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("weight_map['lm_head.weight']: the file name holds a NUL byte"));
}

}  // namespace
}  // namespace snug::test

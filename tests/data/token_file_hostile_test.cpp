// A token file that changes under a run: what was validated at open is what is read.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <vector>

#include "data/dataset.h"
#include "support/temp_dir.h"

namespace snug {
namespace {
namespace token_file_hostile_test {

TEST(TokenFileHostile, TruncatedAfterOpenStillReadsTheValidatedTokens) {
  testing_data::TempDir tmp;
  const std::string path = tmp.file("t.tok");
  std::vector<int32_t> tokens(1 << 16);
  std::iota(tokens.begin(), tokens.end(), 0);
  for (int32_t& t : tokens) t %= 256;
  write_token_file(path, tokens, 2);
  const auto src = open_dataset(path, 256, 0);
  // Another process truncates the file while the run reads it (a mapped file would raise SIGBUS
  // on the next read of the missing pages).
  std::filesystem::resize_file(path, 0);
  std::vector<int32_t> got(tokens.size());
  src->read(0, static_cast<int64_t>(tokens.size()), got.data());
  EXPECT_EQ(got, tokens);
}

}  // namespace token_file_hostile_test
}  // namespace
}  // namespace snug

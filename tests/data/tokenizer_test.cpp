#include "data/tokenizer.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "support/expect_error.h"

namespace snug {
namespace {
namespace tokenizer_test {

TEST(ByteTokenizer, RoundTripsEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  all += "Hello, world! \xc3\xa9t\xc3\xa9";  // UTF-8 survives as bytes
  ByteTokenizer tok;
  const std::vector<int32_t> ids = tok.encode(all);
  ASSERT_EQ(ids.size(), all.size());
  for (int i = 0; i < 256; ++i) EXPECT_EQ(ids[static_cast<size_t>(i)], i);
  EXPECT_EQ(tok.decode(ids), all);
  EXPECT_EQ(tok.vocab_size(), 256);
}

TEST(ByteTokenizer, EncodeEmptyAndDecodeRejectsNonBytes) {
  ByteTokenizer tok;
  EXPECT_TRUE(tok.encode("").empty());
  const std::vector<int32_t> bad = {104, 105, 300};
  EXPECT_THROW(tok.decode(bad), Error);
  const std::string msg = testing_data::error_message([&] { tok.decode(bad); });
  EXPECT_TRUE(testing_data::HasSubstr(msg, "300"));
  EXPECT_TRUE(testing_data::HasSubstr(msg, "position 2"));
}

}  // namespace tokenizer_test
}  // namespace
}  // namespace snug

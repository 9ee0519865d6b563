#include "data/dataset.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "core/error.h"
#include "data/builtin_corpus.h"
#include "data/tokenizer.h"
#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace snug {
namespace {
namespace dataset_test {

using testing_data::error_message;
using testing_data::HasSubstr;
using testing_data::TempDir;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(BuiltinCorpus, DeterministicAsciiAndOfExpectedSize) {
  const std::string& a = builtin_corpus_text();
  const std::string b = builtin_corpus_text();
  EXPECT_EQ(a, b);
  EXPECT_GE(static_cast<int64_t>(a.size()), kBuiltinCorpusTargetBytes);
  EXPECT_LT(static_cast<int64_t>(a.size()), kBuiltinCorpusTargetBytes + 4096);
  std::set<unsigned char> distinct;
  for (char c : a) {
    const auto u = static_cast<unsigned char>(c);
    ASSERT_LT(u, 128) << "non-ASCII byte in the built-in corpus";
    distinct.insert(u);
  }
  // A small alphabet: learnable, yet not trivial.
  EXPECT_GE(distinct.size(), 30u);
  EXPECT_LE(distinct.size(), 60u);
  // Pinned prefix: the generator must not change silently across platforms or versions.
  EXPECT_EQ(a.substr(0, 54), "The clock is yellow. It is windy in the kitchen today.");
  EXPECT_EQ(a.back(), '\n');
}

constexpr uint64_t kPinnedBuiltinHash = 0xed24fd9293dfae88ull;

TEST(BuiltinCorpus, PinnedContent) {
  // FNV-1a over the whole text: catches any change to the generator or platform dependence.
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : builtin_corpus_text()) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  EXPECT_EQ(h, kPinnedBuiltinHash) << "builtin corpus changed; update the pin if intended";
}

TEST(OpenDataset, BuiltinIsByteLevelCorpus) {
  auto src = open_dataset("builtin", 256, 0);
  const std::string& text = builtin_corpus_text();
  ASSERT_EQ(src->size(), static_cast<int64_t>(text.size()));
  EXPECT_LE(src->vocab_size(), 128);
  const std::vector<int32_t> head = read_tokens(*src, 0, 100);
  EXPECT_EQ(ByteTokenizer().decode(head), text.substr(0, 100));
  EXPECT_TRUE(HasSubstr(src->describe(), "builtin"));
}

TEST(OpenDataset, BuiltinRejectsSmallVocabulary) {
  EXPECT_THROW(open_dataset("builtin", 100, 0), Error);
  const std::string msg = error_message([] { open_dataset("builtin", 100, 0); });
  EXPECT_TRUE(HasSubstr(msg, "at least 256"));
  EXPECT_TRUE(HasSubstr(msg, "100"));
}

TEST(OpenDataset, DummyIsDeterministicInRangeAndSeeded) {
  auto a = open_dataset("dummy", 50257, 7);
  auto b = open_dataset("dummy", 50257, 7);
  auto c = open_dataset("dummy", 50257, 8);
  EXPECT_EQ(a->size(), kDummyDatasetTokens);
  EXPECT_EQ(a->vocab_size(), 50257);
  const std::vector<int32_t> ta = read_tokens(*a, 1000, 4096);
  EXPECT_EQ(ta, read_tokens(*b, 1000, 4096));
  EXPECT_NE(ta, read_tokens(*c, 1000, 4096));
  // Reading is position-based: a sub-range equals the matching slice.
  const std::vector<int32_t> sub = read_tokens(*a, 1500, 10);
  EXPECT_EQ(sub, std::vector<int32_t>(ta.begin() + 500, ta.begin() + 510));
  int32_t lo = ta[0], hi = ta[0];
  for (int32_t t : ta) {
    ASSERT_GE(t, 0);
    ASSERT_LT(t, 50257);
    lo = std::min(lo, t);
    hi = std::max(hi, t);
  }
  EXPECT_LT(lo, 1000);  // spread over the whole range
  EXPECT_GT(hi, 49000);
  // Small vocabulary: all ids appear, roughly uniformly.
  auto small = open_dataset("dummy", 4, 1);
  std::vector<int> counts(4, 0);
  for (int32_t t : read_tokens(*small, 0, 40000)) ++counts[static_cast<size_t>(t)];
  for (int k : counts) EXPECT_NEAR(k, 10000, 500);
}

TEST(TokenFile, RoundTripWidth2And4) {
  TempDir dir;
  const std::vector<int32_t> tokens = {0, 1, 255, 256, 65535, 12345, 7, 50256};
  for (int width : {2, 4}) {
    const std::string path = dir.file("t" + std::to_string(width) + ".tok");
    write_token_file(path, tokens, width);
    const std::string raw = read_bytes(path);
    ASSERT_EQ(raw.size(), 24 + tokens.size() * static_cast<size_t>(width));
    EXPECT_EQ(raw.substr(0, 8), "SNUGTOK1");
    EXPECT_EQ(raw[8], 1);                                     // version, little-endian
    EXPECT_EQ(raw[12], width);                                // width
    EXPECT_EQ(raw[16], 8);                                    // count
    EXPECT_EQ(static_cast<uint8_t>(raw[24 + 3 * width]), 0);  // 256 = 0x0100, LE
    EXPECT_EQ(static_cast<uint8_t>(raw[24 + 3 * width + 1]), 1);
    auto src = open_dataset(path, 65536, 0);
    EXPECT_EQ(src->size(), 8);
    EXPECT_EQ(src->vocab_size(), 65536);
    EXPECT_EQ(read_tokens(*src, 0, 8), tokens);
    EXPECT_EQ(read_tokens(*src, 3, 2), (std::vector<int32_t>{256, 65535}));
    EXPECT_TRUE(HasSubstr(src->describe(), path));
  }
  // Width 4 carries ids beyond 16 bits.
  const std::string big = dir.file("big.tok");
  write_token_file(big, std::vector<int32_t>{70000, 3}, 4);
  EXPECT_EQ(read_tokens(*open_dataset(big, 100000, 0), 0, 2), (std::vector<int32_t>{70000, 3}));
  // No temp file left behind; overwriting works.
  write_token_file(big, std::vector<int32_t>{5}, 4);
  EXPECT_EQ(open_dataset(big, 10, 0)->size(), 1);
  int files = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(big).parent_path()))
    files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 3);
}

TEST(TokenFile, WriteRejectsIdsThatDoNotFit) {
  TempDir dir;
  const std::string path = dir.file("x.tok");
  EXPECT_THROW(write_token_file(path, std::vector<int32_t>{1, 65536}, 2), Error);
  EXPECT_TRUE(HasSubstr(error_message([&] {
                          write_token_file(path, std::vector<int32_t>{1, 65536}, 2);
                        }),
                        "65536"));
  EXPECT_THROW(write_token_file(path, std::vector<int32_t>{-1}, 4), Error);
  EXPECT_THROW(write_token_file(path, std::vector<int32_t>{1}, 3), Error);
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(TextFile, TokenizedByteByByte) {
  TempDir dir;
  const std::string path = dir.file("corpus.txt");
  write_bytes(path, "hello\nworld \xc3\xa9\n");
  auto src = open_dataset(path, 256, 0);
  EXPECT_EQ(src->size(), 15);
  EXPECT_EQ(ByteTokenizer().decode(read_tokens(*src, 0, 15)), "hello\nworld \xc3\xa9\n");
  EXPECT_EQ(src->vocab_size(), 0xc3 + 1);
  EXPECT_TRUE(HasSubstr(src->describe(), "text file"));
}

TEST(DatasetErrors, MissingFile) {
  TempDir dir;
  const std::string path = dir.file("nope.tok");
  EXPECT_THROW(open_dataset(path, 256, 0), Error);
  const std::string msg = error_message([&] { open_dataset(path, 256, 0); });
  EXPECT_TRUE(HasSubstr(msg, path));
  EXPECT_TRUE(HasSubstr(msg, "no such file"));
}

TEST(DatasetErrors, TruncatedTokenFile) {
  TempDir dir;
  const std::string path = dir.file("trunc.tok");
  write_token_file(path, std::vector<int32_t>{1, 2, 3, 4, 5}, 2);
  std::string raw = read_bytes(path);
  write_bytes(path, raw.substr(0, raw.size() - 3));  // 3.5 tokens of data left
  EXPECT_THROW(open_dataset(path, 256, 0), Error);
  std::string msg = error_message([&] { open_dataset(path, 256, 0); });
  EXPECT_TRUE(HasSubstr(msg, path));
  EXPECT_TRUE(HasSubstr(msg, "truncated"));
  EXPECT_TRUE(HasSubstr(msg, "5 tokens"));
  // Header cut short.
  write_bytes(path, raw.substr(0, 12));
  msg = error_message([&] { open_dataset(path, 256, 0); });
  EXPECT_TRUE(HasSubstr(msg, "truncated"));
  // Trailing garbage is also rejected.
  write_bytes(path, raw + "xy");
  msg = error_message([&] { open_dataset(path, 256, 0); });
  EXPECT_TRUE(HasSubstr(msg, "unexpected bytes"));
}

TEST(DatasetErrors, BadHeaderFields) {
  TempDir dir;
  const std::string path = dir.file("bad.tok");
  write_token_file(path, std::vector<int32_t>{1, 2}, 2);
  std::string raw = read_bytes(path);
  std::string bad_width = raw;
  bad_width[12] = 3;
  write_bytes(path, bad_width);
  EXPECT_TRUE(HasSubstr(error_message([&] { open_dataset(path, 256, 0); }), "width 3"));
  std::string bad_version = raw;
  bad_version[8] = 2;
  write_bytes(path, bad_version);
  EXPECT_TRUE(HasSubstr(error_message([&] { open_dataset(path, 256, 0); }), "version 2"));
  std::string bad_magic = raw;
  bad_magic[7] = '9';
  write_bytes(path, bad_magic);
  EXPECT_TRUE(HasSubstr(error_message([&] { open_dataset(path, 256, 0); }), "magic"));
}

TEST(DatasetErrors, TokenIdOutOfVocabulary) {
  TempDir dir;
  const std::string path = dir.file("ids.tok");
  write_token_file(path, std::vector<int32_t>{1, 2, 3, 999, 4}, 2);
  EXPECT_THROW(open_dataset(path, 500, 0), Error);
  const std::string msg = error_message([&] { open_dataset(path, 500, 0); });
  EXPECT_TRUE(HasSubstr(msg, path));
  EXPECT_TRUE(HasSubstr(msg, "token id 999"));
  EXPECT_TRUE(HasSubstr(msg, "position 3"));
  EXPECT_TRUE(HasSubstr(msg, "500"));
  EXPECT_NO_THROW(open_dataset(path, 1000, 0));
  // Text bytes beyond a small vocabulary.
  const std::string txt = dir.file("t.txt");
  write_bytes(txt, "ab\xff");
  const std::string tmsg = error_message([&] { open_dataset(txt, 128, 0); });
  EXPECT_TRUE(HasSubstr(tmsg, "255"));
  EXPECT_TRUE(HasSubstr(tmsg, "position 2"));
}

TEST(DatasetErrors, EmptyDataset) {
  TempDir dir;
  const std::string tok = dir.file("empty.tok");
  write_token_file(tok, std::vector<int32_t>{}, 4);
  std::string msg = error_message([&] { open_dataset(tok, 256, 0); });
  EXPECT_TRUE(HasSubstr(msg, "empty"));
  EXPECT_TRUE(HasSubstr(msg, tok));
  const std::string txt = dir.file("empty.txt");
  write_bytes(txt, "");
  msg = error_message([&] { open_dataset(txt, 256, 0); });
  EXPECT_TRUE(HasSubstr(msg, "empty"));
  EXPECT_TRUE(HasSubstr(msg, txt));
}

TEST(DatasetErrors, DirectoryAndBadVocab) {
  TempDir dir;
  const std::string d = dir.file("sub");
  std::filesystem::create_directories(d);
  EXPECT_TRUE(HasSubstr(error_message([&] { open_dataset(d, 256, 0); }), "not a regular file"));
  EXPECT_THROW(open_dataset("dummy", 0, 0), Error);
}

TEST(InMemoryTokenSource, ReportsRequiredVocabulary) {
  InMemoryTokenSource src({3, 9, 4});
  EXPECT_EQ(src.size(), 3);
  EXPECT_EQ(src.vocab_size(), 10);
  EXPECT_EQ(read_tokens(src, 1, 2), (std::vector<int32_t>{9, 4}));
  EXPECT_THROW(InMemoryTokenSource({1, -2}), Error);
}

}  // namespace dataset_test
}  // namespace
}  // namespace snug

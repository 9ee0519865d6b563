// Datasets: a flat stream of token ids that the DataLoader cuts into training windows.
//
// open_dataset(spec, vocab_size, seed) understands (see docs/data.md):
//   "builtin"  the built-in English-like corpus (data/builtin_corpus.h), byte-level (vocab 256)
//   "dummy"    uniform random ids in [0, vocab_size), 1<<20 of them, computed from (seed,
//              position) on demand (no memory), for throughput benchmarks as in HF's examples
//   PATH       a token file (starts with the magic "SNUGTOK1", format below) or else a plain
//              text file, tokenized byte by byte
// Every problem (missing, unreadable, truncated or empty file, token id >= vocab_size, ...) is a
// snug::Error whose message names the dataset and what is wrong.
//
// Token file format, all integers little-endian:
//   offset 0   8 bytes   magic "SNUGTOK1"
//   offset 8   uint32    version = 1
//   offset 12  uint32    width: bytes per token, 2 (uint16 ids) or 4 (uint32 ids < 2^31)
//   offset 16  uint64    count: number of tokens
//   offset 24  count * width bytes of tokens; nothing after them
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace snug {

inline constexpr char kTokenFileMagic[9] = "SNUGTOK1";
inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr int64_t kTokenFileHeaderBytes = 24;
inline constexpr int64_t kDummyDatasetTokens = int64_t{1} << 20;

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Number of tokens.
  virtual int64_t size() const = 0;
  // Copies tokens [begin, begin + n) to out. Requires 0 <= begin, 0 <= n, begin + n <= size().
  virtual void read(int64_t begin, int64_t n, int32_t* out) const = 0;
  // The smallest vocabulary that covers every token: max token id + 1 (for "dummy", the
  // vocab_size it was opened with).
  virtual int64_t vocab_size() const = 0;
  // One line for logs, e.g. "token file data/x.tok (1000000 tokens, 2-byte ids)".
  virtual std::string describe() const = 0;

 protected:
  // Throws (as an internal error) unless [begin, begin + n) lies within [0, size()).
  void check_range(int64_t begin, int64_t n) const;
};

// Tokens held in memory (used by tests and by callers that build a stream themselves).
class InMemoryTokenSource : public TokenSource {
 public:
  // Throws snug::Error if a token is negative.
  explicit InMemoryTokenSource(std::vector<int32_t> tokens, std::string name = "in-memory tokens");
  int64_t size() const override { return static_cast<int64_t>(tokens_.size()); }
  void read(int64_t begin, int64_t n, int32_t* out) const override;
  int64_t vocab_size() const override { return vocab_; }
  std::string describe() const override;

 private:
  std::vector<int32_t> tokens_;
  std::string name_;
  int64_t vocab_ = 0;
};

// Opens a dataset as described above. vocab_size is the model's vocabulary: every token must be
// below it. seed only affects "dummy". Throws snug::Error on any problem, including an empty
// dataset.
std::unique_ptr<TokenSource> open_dataset(const std::string& spec, int64_t vocab_size,
                                          uint64_t seed);

// Writes a token file (format above) atomically: to PATH.tmp.<pid>, then renamed over PATH.
// width is 2 or 4; throws snug::Error if a token does not fit it (or is negative) or on I/O
// failure.
void write_token_file(const std::string& path, std::span<const int32_t> tokens, int width);

// Convenience: tokens [begin, begin + n) as a vector.
std::vector<int32_t> read_tokens(const TokenSource& src, int64_t begin, int64_t n);

}  // namespace snug

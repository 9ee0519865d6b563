#include "data/dataset.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/random.h"
#include "data/builtin_corpus.h"
#include "data/tokenizer.h"
#include "io/json_input.h"
#include "io/output_file.h"

namespace snug {

void TokenSource::check_range(int64_t begin, int64_t n) const {
  SNUG_ASSERT(begin >= 0 && n >= 0 && begin <= size() - n, "read of [", begin, ", ", begin + n,
              ") from ", describe(), " of ", size(), " tokens");
}

InMemoryTokenSource::InMemoryTokenSource(std::vector<int32_t> tokens, std::string name)
    : tokens_(std::move(tokens)), name_(std::move(name)) {
  int64_t max_id = -1;
  for (size_t i = 0; i < tokens_.size(); ++i) {
    SNUG_CHECK(tokens_[i] >= 0, name_, ": token at position ", i, " is negative (", tokens_[i],
               ")");
    max_id = std::max<int64_t>(max_id, tokens_[i]);
  }
  vocab_ = max_id + 1;
}

void InMemoryTokenSource::read(int64_t begin, int64_t n, int32_t* out) const {
  check_range(begin, n);
  std::copy_n(tokens_.data() + begin, n, out);
}

std::string InMemoryTokenSource::describe() const {
  return detail::concat(name_, " (", size(), " tokens)");
}

std::vector<int32_t> read_tokens(const TokenSource& src, int64_t begin, int64_t n) {
  std::vector<int32_t> out(static_cast<size_t>(std::max<int64_t>(n, 0)));
  src.read(begin, n, out.data());
  return out;
}

namespace {

// Byte-level text: one token per byte.
class ByteTextSource : public TokenSource {
 public:
  ByteTextSource(std::string text, std::string description)
      : text_(std::move(text)), description_(std::move(description)) {
    int max_byte = -1;
    for (char c : text_) max_byte = std::max(max_byte, static_cast<int>(static_cast<uint8_t>(c)));
    vocab_ = max_byte + 1;
  }
  int64_t size() const override { return static_cast<int64_t>(text_.size()); }
  void read(int64_t begin, int64_t n, int32_t* out) const override {
    check_range(begin, n);
    const char* p = text_.data() + begin;
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(p[i]);
  }
  int64_t vocab_size() const override { return vocab_; }
  std::string describe() const override { return description_; }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::string description_;
  int64_t vocab_ = 0;
};

// Uniform random ids, a pure function of (seed, position).
class DummySource : public TokenSource {
 public:
  DummySource(int64_t vocab, uint64_t seed, int64_t n)
      : vocab_(vocab), key_(splitmix64_mix(seed ^ 0x64756d6d79746f6bull)), n_(n), seed_(seed) {}
  int64_t size() const override { return n_; }
  void read(int64_t begin, int64_t n, int32_t* out) const override {
    check_range(begin, n);
    const uint64_t v = static_cast<uint64_t>(vocab_);
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t pos = static_cast<uint64_t>(begin + i);
      const uint64_t r = splitmix64_mix(key_ + pos * 0x9e3779b97f4a7c15ull);
      out[i] = static_cast<int32_t>(r % v);  // modulo bias < vocab / 2^64: negligible
    }
  }
  int64_t vocab_size() const override { return vocab_; }
  std::string describe() const override {
    return detail::concat("dummy (", n_, " uniform random ids in [0, ", vocab_, "), seed ", seed_,
                          ")");
  }

 private:
  int64_t vocab_;
  uint64_t key_;
  int64_t n_;
  uint64_t seed_;
};

uint32_t load_u32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint64_t load_u64(const unsigned char* p) {
  return static_cast<uint64_t>(load_u32(p)) | (static_cast<uint64_t>(load_u32(p + 4)) << 32);
}
void store_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void store_u64(unsigned char* p, uint64_t v) {
  store_u32(p, static_cast<uint32_t>(v));
  store_u32(p + 4, static_cast<uint32_t>(v >> 32));
}

// A token file, read into memory once; ids are validated then, so what is trained on is what
// was validated, whatever happens to the file afterwards.
class TokenFileSource : public TokenSource {
 public:
  TokenFileSource(std::string file, const std::string& path, int64_t vocab_limit)
      : file_(std::move(file)), path_(path) {
    const auto* p = reinterpret_cast<const unsigned char*>(file_.data());
    const auto bytes = static_cast<int64_t>(file_.size());
    SNUG_CHECK(bytes >= kTokenFileHeaderBytes, "dataset '", path,
               "': truncated token file: ", bytes, " bytes, shorter than the ",
               kTokenFileHeaderBytes, "-byte header");
    const uint32_t version = load_u32(p + 8);
    SNUG_CHECK(version == kTokenFileVersion, "dataset '", path, "': token file version ", version,
               " is not supported (this snug reads version ", kTokenFileVersion, ")");
    const uint32_t width = load_u32(p + 12);
    SNUG_CHECK(width == 2 || width == 4, "dataset '", path, "': token width ", width,
               " in the header is invalid (must be 2 or 4 bytes)");
    width_ = static_cast<int>(width);
    const uint64_t count = load_u64(p + 16);
    const uint64_t have = static_cast<uint64_t>(bytes - kTokenFileHeaderBytes);
    SNUG_CHECK(count <= have / width, "dataset '", path,
               "': truncated token file: the header says ", count, " tokens (", count, " x ", width,
               " bytes) but only ", have, " bytes of token data are present");
    SNUG_CHECK(count * width == have, "dataset '", path, "': token file has ", have - count * width,
               " unexpected bytes after its ", count, " tokens");
    SNUG_CHECK(count > 0, "dataset '", path, "': empty dataset (the token file holds 0 tokens)");
    n_ = static_cast<int64_t>(count);
    tokens_ = p + kTokenFileHeaderBytes;

    // Validate every id once, so that read() never returns an id the model cannot embed.
    int64_t max_id = -1;
    for (int64_t i = 0; i < n_; ++i) {
      const int64_t id = token(i);
      if (id >= vocab_limit) {
        throw Error(detail::concat("dataset '", path, "': token id ", id, " at position ", i,
                                   " is out of range for the model's vocabulary of ", vocab_limit,
                                   " (ids must be < ", vocab_limit, ")"));
      }
      max_id = std::max(max_id, id);
    }
    vocab_ = max_id + 1;
  }
  int64_t size() const override { return n_; }
  void read(int64_t begin, int64_t n, int32_t* out) const override {
    check_range(begin, n);
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(token(begin + i));
  }
  int64_t vocab_size() const override { return vocab_; }
  std::string describe() const override {
    return detail::concat("token file ", path_, " (", n_, " tokens, ", width_, "-byte ids)");
  }

 private:
  int64_t token(int64_t i) const {
    const unsigned char* q = tokens_ + i * width_;
    if (width_ == 2) return static_cast<int64_t>(q[0]) | (static_cast<int64_t>(q[1]) << 8);
    return static_cast<int64_t>(load_u32(q));
  }

  std::string file_;
  std::string path_;
  const unsigned char* tokens_ = nullptr;
  int width_ = 0;
  int64_t n_ = 0;
  int64_t vocab_ = 0;
};

std::unique_ptr<TokenSource> open_path(const std::string& path, int64_t vocab_size) {
  std::error_code ec;
  const bool exists = std::filesystem::exists(path, ec);
  SNUG_CHECK(!ec, "dataset '", path, "': cannot access: ", ec.message());
  SNUG_CHECK(exists, "dataset '", path,
             "': no such file (expected \"builtin\", \"dummy\", or the path of a token or text "
             "file)");
  std::string file = read_input_file(path, detail::concat("dataset '", path, "'"));
  const std::string_view magic(kTokenFileMagic, 8);
  const std::string_view head = std::string_view(file).substr(0, 8);
  if (head == magic) return std::make_unique<TokenFileSource>(std::move(file), path, vocab_size);
  SNUG_CHECK(head.substr(0, 7) != magic.substr(0, 7) || file.size() < 8, "dataset '", path,
             "': unsupported token file magic '", head, "' (expected '", magic, "')");

  // Plain text, one token per byte.
  SNUG_CHECK(!file.empty(), "dataset '", path, "': empty dataset (the file is empty)");
  std::string text = std::move(file);
  for (size_t i = 0; i < text.size(); ++i) {
    const int64_t id = static_cast<uint8_t>(text[i]);
    if (id >= vocab_size) {
      throw Error(detail::concat("dataset '", path, "': text byte ", id, " at position ", i,
                                 " is out of range for the model's vocabulary of ", vocab_size,
                                 " (byte-level text needs ids < ", vocab_size,
                                 "; use a model "
                                 "with vocab_size >= 256)"));
    }
  }
  std::string description =
      detail::concat("text file ", path, " (", text.size(), " bytes, byte-level tokens)");
  return std::make_unique<ByteTextSource>(std::move(text), std::move(description));
}

}  // namespace

std::unique_ptr<TokenSource> open_dataset(const std::string& spec, int64_t vocab_size,
                                          uint64_t seed) {
  SNUG_CHECK(vocab_size > 0, "dataset '", spec, "': vocab_size must be positive, got ", vocab_size);
  SNUG_CHECK(!spec.empty(), "empty dataset spec (expected \"builtin\", \"dummy\", or a path)");
  if (spec == "builtin") {
    SNUG_CHECK(vocab_size >= ByteTokenizer::kVocabSize,
               "dataset 'builtin' is byte-level and needs a model vocabulary of at least ",
               ByteTokenizer::kVocabSize, ", but vocab_size is ", vocab_size,
               " (use a byte-level model such as gpt2-tiny)");
    const std::string& text = builtin_corpus_text();
    std::string description =
        detail::concat("builtin corpus (", text.size(), " bytes, byte-level tokens)");
    return std::make_unique<ByteTextSource>(text, std::move(description));
  }
  if (spec == "dummy") {
    SNUG_CHECK(vocab_size <= (int64_t{1} << 31), "dataset 'dummy': vocab_size ", vocab_size,
               " does not fit 32-bit token ids");
    return std::make_unique<DummySource>(vocab_size, seed, kDummyDatasetTokens);
  }
  return open_path(spec, vocab_size);
}

void write_token_file(const std::string& path, std::span<const int32_t> tokens, int width) {
  SNUG_CHECK(width == 2 || width == 4, "write_token_file '", path, "': width must be 2 or 4, got ",
             width);
  const int64_t max_id = width == 2 ? 0xffff : 0x7fffffff;
  for (size_t i = 0; i < tokens.size(); ++i) {
    SNUG_CHECK(tokens[i] >= 0 && tokens[i] <= max_id, "write_token_file '", path, "': token ",
               tokens[i], " at position ", i, " does not fit a ", width, "-byte id (0..", max_id,
               ")");
  }
  std::vector<unsigned char> buf(static_cast<size_t>(kTokenFileHeaderBytes) +
                                 tokens.size() * static_cast<size_t>(width));
  std::memcpy(buf.data(), kTokenFileMagic, 8);
  store_u32(buf.data() + 8, kTokenFileVersion);
  store_u32(buf.data() + 12, static_cast<uint32_t>(width));
  store_u64(buf.data() + 16, tokens.size());
  unsigned char* q = buf.data() + kTokenFileHeaderBytes;
  for (size_t i = 0; i < tokens.size(); ++i, q += width) {
    const uint32_t v = static_cast<uint32_t>(tokens[i]);
    if (width == 2) {
      q[0] = static_cast<unsigned char>(v);
      q[1] = static_cast<unsigned char>(v >> 8);
    } else {
      store_u32(q, v);
    }
  }

  OutputFile out(path, detail::concat("write_token_file '", path, "'"));
  out.write(buf.data(), buf.size());
  out.commit();
}

}  // namespace snug

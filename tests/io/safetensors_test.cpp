#include "io/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "kernels/backends.h"

namespace snug {
namespace {
namespace safetensors_test {

namespace fs = std::filesystem;

// EXPECT_THROW of a snug::Error whose message contains `substr`.
#define EXPECT_ERROR_CONTAINS(stmt, substr)                                 \
  do {                                                                      \
    std::string msg_;                                                       \
    EXPECT_THROW(                                                           \
        {                                                                   \
          try {                                                             \
            stmt;                                                           \
          } catch (const ::snug::Error& e_) {                               \
            msg_ = e_.what();                                               \
            throw;                                                          \
          }                                                                 \
        },                                                                  \
        ::snug::Error);                                                     \
    EXPECT_NE(msg_.find(substr), std::string::npos) << "message: " << msg_; \
  } while (0)

class SafetensorsIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("snug_safetensors_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  // A file of an explicit header-length field, header text and data bytes.
  std::string write_raw(const std::string& name, uint64_t header_len, const std::string& header,
                        const std::string& data) const {
    const std::string p = file(name);
    std::ofstream f(p, std::ios::binary);
    f.write(reinterpret_cast<const char*>(&header_len), 8);
    f.write(header.data(), static_cast<std::streamsize>(header.size()));
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    return p;
  }
  std::string write_header(const std::string& name, const std::string& header,
                           size_t data_bytes) const {
    return write_raw(name, header.size(), header, std::string(data_bytes, '\0'));
  }

  fs::path dir_;
  Device cpu_{cpu_backend()};
};

TEST_F(SafetensorsIo, RoundTripF32Bf16I32Metadata) {
  Tensor a = Tensor::empty({2, 3}, DType::f32, Category::weights, cpu_);
  for (int i = 0; i < 6; ++i) a.data<float>()[i] = 0.1f * static_cast<float>(i) - 0.2f;
  Tensor b = Tensor::empty({5}, DType::bf16, Category::weights, cpu_);
  const float bvals[5] = {1.0f, -2.5f, 3.14159f, 1e-3f, 65504.0f};
  for (int i = 0; i < 5; ++i) b.data_u16()[i] = f32_to_bf16(bvals[i]);
  Tensor c = Tensor::empty({2, 2}, DType::i32, Category::input_data, cpu_);
  const int32_t cvals[4] = {0, -1, 2147483647, -2147483647 - 1};
  std::memcpy(c.data<int32_t>(), cvals, sizeof(cvals));
  Tensor s = Tensor::empty({}, DType::f32, Category::weights, cpu_);
  s.data<float>()[0] = 42.0f;

  const std::string p = file("rt.safetensors");
  save_safetensors(p, {{"w.a", &a}, {"w.b", &b}, {"ids", &c}, {"scalar", &s}},
                   {{"step", "17"}, {"model", "gpt2-tiny"}});

  // Nothing besides the file itself is left in the directory (the temporary was renamed).
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "rt.safetensors");
  }
  EXPECT_EQ(entries, 1);
  // Header length is a multiple of 8 (the data section stays aligned).
  {
    std::ifstream f(p, std::ios::binary);
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    EXPECT_EQ(n % 8, 0u);
  }

  SafetensorsFile f(p);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"w.a", "w.b", "ids", "scalar"}));
  EXPECT_TRUE(f.contains("w.b"));
  EXPECT_FALSE(f.contains("w.c"));
  EXPECT_EQ(f.info("w.a").dtype, "F32");
  EXPECT_EQ(f.info("w.a").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.info("w.b").dtype, "BF16");
  EXPECT_EQ(f.info("w.b").end - f.info("w.b").begin, 10);
  EXPECT_EQ(f.info("ids").dtype, "I32");
  EXPECT_EQ(f.info("scalar").shape, (std::vector<int64_t>{}));
  EXPECT_EQ(f.metadata(),
            (std::map<std::string, std::string>{{"step", "17"}, {"model", "gpt2-tiny"}}));

  const std::vector<float> ra = f.read_f32("w.a");
  ASSERT_EQ(ra.size(), 6u);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(ra[i], a.data<float>()[i]);
  const std::vector<float> rb = f.read_f32("w.b");
  ASSERT_EQ(rb.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(rb[i], bf16_to_f32(f32_to_bf16(bvals[i])));
  const std::vector<int32_t> rc = f.read_i32("ids");
  EXPECT_EQ(rc, (std::vector<int32_t>(cvals, cvals + 4)));
  EXPECT_EQ(f.read_f32("scalar"), (std::vector<float>{42.0f}));

  // read_into: same dtype, and converted (f32 file -> bf16 tensor, bf16 file -> f32 tensor).
  Tensor a2 = Tensor::zeros({2, 3}, DType::f32, Category::weights, cpu_);
  f.read_into("w.a", a2);
  EXPECT_EQ(std::memcmp(a2.raw(), a.raw(), 24), 0);
  Tensor b2 = Tensor::zeros({5}, DType::f32, Category::weights, cpu_);
  f.read_into("w.b", b2);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(b2.data<float>()[i], rb[i]);
  Tensor a3 = Tensor::zeros({2, 3}, DType::bf16, Category::weights, cpu_);
  f.read_into("w.a", a3);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a3.data_u16()[i], f32_to_bf16(ra[i]));
  Tensor c2 = Tensor::zeros({2, 2}, DType::i32, Category::input_data, cpu_);
  f.read_into("ids", c2);
  EXPECT_EQ(std::memcmp(c2.raw(), cvals, sizeof(cvals)), 0);
}

// The streamed writer (one tensor's bytes at a time, from a callback) writes the very bytes of
// save_safetensors for the same tensors, in the given order, empty tensors included.
TEST_F(SafetensorsIo, StreamedWriteEqualsTheWholeWrite) {
  Tensor a = Tensor::empty({3, 5}, DType::f32, Category::weights, cpu_);
  for (int i = 0; i < 15; ++i) a.data<float>()[i] = 0.25f * static_cast<float>(i) - 1.0f;
  Tensor e = Tensor::empty({0, 4}, DType::f32, Category::weights, cpu_);
  Tensor b = Tensor::empty({7}, DType::bf16, Category::weights, cpu_);
  for (int i = 0; i < 7; ++i) b.data_u16()[i] = f32_to_bf16(static_cast<float>(i) / 3.0f);
  const std::vector<std::pair<std::string, const Tensor*>> tensors = {
      {"z.weight", &a}, {"empty", &e}, {"a.bias", &b}};
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  save_safetensors(file("whole.safetensors"), tensors, meta);
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, t] : tensors) entries.push_back({name, t->dtype(), t->shape()});
  EXPECT_EQ(entries[0].nbytes(), 60);
  EXPECT_EQ(entries[2].nbytes(), 14);
  std::vector<size_t> asked;
  save_safetensors_streamed(file("streamed.safetensors"), entries, meta, [&](size_t i, void* dst) {
    asked.push_back(i);
    std::memcpy(dst, tensors[i].second->raw(), static_cast<size_t>(tensors[i].second->nbytes()));
  });
  EXPECT_EQ(asked, (std::vector<size_t>{0, 2}));  // nothing to fill for the empty tensor
  auto bytes = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(bytes(file("streamed.safetensors")), bytes(file("whole.safetensors")));
  EXPECT_ERROR_CONTAINS(save_safetensors_streamed(file("dup.safetensors"), {entries[0], entries[0]},
                                                  {}, [](size_t, void*) {}),
                        "duplicate tensor name 'z.weight'");
}

TEST_F(SafetensorsIo, SaveReplacesExistingFileAndEmptyMetadataIsOmitted) {
  Tensor a = Tensor::zeros({3}, DType::f32, Category::weights, cpu_);
  const std::string p = file("x.safetensors");
  save_safetensors(p, {{"a", &a}}, {{"k", "v"}});
  a.data<float>()[1] = 7.0f;
  Tensor u = Tensor::zeros({4}, DType::u8, Category::weights, cpu_);
  save_safetensors(p, {{"a", &a}, {"u", &u}});
  SafetensorsFile f(p);
  EXPECT_EQ(f.read_f32("a"), (std::vector<float>{0.0f, 7.0f, 0.0f}));
  EXPECT_EQ(f.info("u").dtype, "U8");
  EXPECT_TRUE(f.metadata().empty());
}

TEST_F(SafetensorsIo, ReadsPythonWrittenFile) {
  const std::string p = std::string(SNUG_TEST_DATA_DIR) + "/safetensors_fixture.safetensors";
  SafetensorsFile f(p);
  EXPECT_EQ(f.metadata(), (std::map<std::string, std::string>{
                              {"format", "pt"}, {"source", "gen_safetensors_fixture.py"}}));
  // The Python writer orders by dtype alignment, then name; names() follows the offsets.
  const std::vector<std::string> names = f.names();
  EXPECT_EQ(names.size(), 9u);
  for (size_t i = 1; i < names.size(); ++i)
    EXPECT_LE(f.info(names[i - 1]).end, f.info(names[i]).begin);

  EXPECT_EQ(f.info("f32").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.read_f32("f32"), (std::vector<float>{0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 2.5f}));
  EXPECT_EQ(f.read_f32("f16"), (std::vector<float>{1.0f, -2.0f, 0.25f, 65504.0f}));
  EXPECT_EQ(f.read_f32("bf16"), (std::vector<float>{1.0f, -3.0f, 0.125f, 256.0f}));
  EXPECT_EQ(f.read_f32("f64"), (std::vector<float>{1.5f, -0.75f}));
  EXPECT_EQ(f.read_f32("scalar"), (std::vector<float>{3.0f}));
  EXPECT_TRUE(f.info("scalar").shape.empty());
  EXPECT_EQ(f.read_i32("i32"), (std::vector<int32_t>{0, -7, 2147483647}));
  EXPECT_EQ(f.read_i32("i64"), (std::vector<int32_t>{5, -6, 2147483647, -2147483647 - 1}));
  EXPECT_EQ(f.info("i64").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(f.info("u8").dtype, "U8");
  EXPECT_EQ(f.info("u8").end - f.info("u8").begin, 3);

  EXPECT_ERROR_CONTAINS(f.read_i32("i64_big"), "'i64_big' element 0 = 1099511627776");
  EXPECT_ERROR_CONTAINS(f.read_f32("i32"), "'i32' has dtype I32, not a float dtype");
  EXPECT_ERROR_CONTAINS(f.read_i32("f32"), "'f32' has dtype F32, not an integer dtype");
  Tensor wrong = Tensor::zeros({3, 2}, DType::f32, Category::weights, cpu_);
  EXPECT_ERROR_CONTAINS(f.read_into("f32", wrong), "tensor 'f32': expected shape");
  Tensor ints = Tensor::zeros({2, 3}, DType::i32, Category::weights, cpu_);
  EXPECT_ERROR_CONTAINS(f.read_into("f32", ints), "cannot read F32 into a i32 tensor");
}

TEST_F(SafetensorsIo, MetaTensorsAreShapeCheckedButNotReadNorSaved) {
  Device meta(meta_backend());
  Tensor a = Tensor::zeros({2, 3}, DType::f32, Category::weights, cpu_);
  const std::string p = file("m.safetensors");
  save_safetensors(p, {{"a", &a}});
  SafetensorsFile f(p);
  Tensor m = Tensor::empty({2, 3}, DType::f32, Category::weights, meta);
  EXPECT_NO_THROW(f.read_into("a", m));
  Tensor bad = Tensor::empty({6}, DType::f32, Category::weights, meta);
  EXPECT_ERROR_CONTAINS(f.read_into("a", bad), "expected shape");
  EXPECT_ERROR_CONTAINS(save_safetensors(file("n.safetensors"), {{"m", &m}}),
                        "'m' is on the meta device");
  EXPECT_FALSE(fs::exists(file("n.safetensors")));
}

TEST_F(SafetensorsIo, SaveRejectsBadNames) {
  Tensor a = Tensor::zeros({1}, DType::f32, Category::weights, cpu_);
  EXPECT_ERROR_CONTAINS(save_safetensors(file("d.safetensors"), {{"a", &a}, {"a", &a}}),
                        "duplicate tensor name 'a'");
  EXPECT_ERROR_CONTAINS(save_safetensors(file("d.safetensors"), {{"__metadata__", &a}}),
                        "invalid tensor name");
  EXPECT_ERROR_CONTAINS(save_safetensors(dir_.string() + "/no/such/dir/x.safetensors", {{"a", &a}}),
                        "cannot create");
}

TEST_F(SafetensorsIo, ErrorMissingFile) {
  EXPECT_ERROR_CONTAINS(SafetensorsFile{file("absent.safetensors")},
                        "absent.safetensors: cannot open");
}

TEST_F(SafetensorsIo, ErrorFileTooShort) {
  const std::string p = file("short.safetensors");
  std::ofstream(p, std::ios::binary) << "abc";
  EXPECT_ERROR_CONTAINS(SafetensorsFile{p}, "short.safetensors: not a safetensors file: 3 bytes");
}

TEST_F(SafetensorsIo, ErrorTruncatedData) {
  // A valid file cut short: the header is intact but the data section is missing bytes.
  Tensor a = Tensor::zeros({16}, DType::f32, Category::weights, cpu_);
  const std::string p = file("trunc.safetensors");
  save_safetensors(p, {{"weights", &a}});
  fs::resize_file(p, fs::file_size(p) - 5);
  EXPECT_ERROR_CONTAINS(SafetensorsFile{p}, "tensor 'weights': data_offsets [0,64] out of range");
}

TEST_F(SafetensorsIo, ErrorHeaderLengthBeyondFile) {
  const std::string p = write_raw("len.safetensors", 1000, "{}", "");
  EXPECT_ERROR_CONTAINS(SafetensorsFile{p}, "len.safetensors: header length 1000 exceeds the file");
  const std::string q = write_raw("huge.safetensors", ~uint64_t{0}, "{}", "");
  EXPECT_ERROR_CONTAINS(SafetensorsFile{q}, "exceeds the file size");
}

TEST_F(SafetensorsIo, ErrorMalformedJson) {
  const std::string p = write_header("json.safetensors", R"({"a": {"dtype": "F32",)", 0);
  EXPECT_ERROR_CONTAINS(SafetensorsFile{p}, "json.safetensors: malformed safetensors JSON header");
  const std::string q = write_header("arr.safetensors", "[1, 2]", 0);
  EXPECT_ERROR_CONTAINS(SafetensorsFile{q}, "header is not a JSON object");
  const std::string r = write_header("meta.safetensors", R"({"__metadata__": {"step": 3}})", 0);
  EXPECT_ERROR_CONTAINS(SafetensorsFile{r}, "__metadata__ value of 'step' is not a string");
  const std::string s =
      write_header("noshape.safetensors", R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})", 4);
  EXPECT_ERROR_CONTAINS(SafetensorsFile{s}, "tensor 't': missing array 'shape'");
}

TEST_F(SafetensorsIo, ErrorUnknownDtype) {
  const std::string p = write_header(
      "dt.safetensors", R"({"t": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}})", 4);
  EXPECT_ERROR_CONTAINS(SafetensorsFile{p}, "tensor 't': unknown dtype 'F33'");
}

TEST_F(SafetensorsIo, ErrorOffsetsOutOfRange) {
  const std::string p = write_header(
      "oor.safetensors", R"({"t": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8);
  EXPECT_ERROR_CONTAINS(SafetensorsFile{p},
                        "tensor 't': data_offsets [0,16] out of range: the data section has 8");
  const std::string q = write_header(
      "neg.safetensors", R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 8);
  EXPECT_ERROR_CONTAINS(SafetensorsFile{q}, "tensor 't': data_offsets [-4,0] are not");
  const std::string r = write_header(
      "rev.safetensors", R"({"t": {"dtype": "F32", "shape": [0], "data_offsets": [4, 0]}})", 8);
  EXPECT_ERROR_CONTAINS(SafetensorsFile{r}, "have begin > end");
}

TEST_F(SafetensorsIo, ErrorOffsetsInconsistentWithShape) {
  const std::string p = write_header(
      "sz.safetensors", R"({"t": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 8]}})", 16);
  EXPECT_ERROR_CONTAINS(
      SafetensorsFile{p},
      "tensor 't': data_offsets [0,8] span 8 bytes but BF16 shape (2,3) needs 12");
}

TEST_F(SafetensorsIo, ErrorOverlappingTensors) {
  const std::string p =
      write_header("ov.safetensors",
                   R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                         "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
                   12);
  EXPECT_ERROR_CONTAINS(SafetensorsFile{p}, "tensors 'a' [0, 8) and 'b' [4, 12) overlap");
}

TEST_F(SafetensorsIo, ErrorUnknownTensor) {
  Tensor a = Tensor::zeros({1}, DType::f32, Category::weights, cpu_);
  const std::string p = file("u.safetensors");
  save_safetensors(p, {{"a", &a}});
  SafetensorsFile f(p);
  EXPECT_ERROR_CONTAINS(f.info("transformer.wte.weight"),
                        "u.safetensors: no tensor named 'transformer.wte.weight'");
  EXPECT_ERROR_CONTAINS(f.read_f32("b"), "no tensor named 'b'");
  Tensor t = Tensor::zeros({1}, DType::f32, Category::weights, cpu_);
  EXPECT_ERROR_CONTAINS(f.read_into("c", t), "no tensor named 'c'");
}

}  // namespace safetensors_test
}  // namespace
}  // namespace snug

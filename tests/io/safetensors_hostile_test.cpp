// safetensors files that other readers refuse (issue 15): bytes no tensor indexes (a gap between
// tensors, trailing bytes) and duplicate keys, which JSON parsers silently resolve to the last.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "io/safetensors.h"

namespace snug {
namespace {
namespace safetensors_hostile_test {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class SafetensorsHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("snug_st_hostile_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& header, size_t data_bytes) {
    const std::string p = (dir_ / name).string();
    std::ofstream f(p, std::ios::binary);
    const uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header << std::string(data_bytes, '\0');
    return p;
  }
  std::string error_of(const std::string& path) {
    try {
      SafetensorsFile f(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "(opened without error)";
  }

  fs::path dir_;
};

TEST_F(SafetensorsHostile, TrailingBytesAreRefusedWithTheirOffset) {
  const std::string p = write(
      "trail.safetensors", R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 12);
  const std::string msg = error_of(p);
  EXPECT_THAT(msg, HasSubstr(p));
  EXPECT_THAT(msg, HasSubstr("4 bytes after the last tensor"));
  EXPECT_THAT(msg, HasSubstr("data offset 8"));
}

TEST_F(SafetensorsHostile, GapBetweenTensorsIsRefusedWithItsOffset) {
  const std::string p = write("gap.safetensors",
                              R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                  "b": {"dtype": "F32", "shape": [1], "data_offsets": [8, 12]}})",
                              12);
  const std::string msg = error_of(p);
  EXPECT_THAT(msg, HasSubstr(p));
  EXPECT_THAT(msg, HasSubstr("4 unindexed bytes at data offset 4"));
  EXPECT_THAT(msg, HasSubstr("'b'"));
  const std::string q = write(
      "lead.safetensors", R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8);
  EXPECT_THAT(error_of(q), HasSubstr("4 unindexed bytes at data offset 0"));
}

TEST_F(SafetensorsHostile, DuplicateKeysAreRefusedByName) {
  const std::string p = write("dup.safetensors",
                              R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                  "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}})",
                              4);
  const std::string msg = error_of(p);
  EXPECT_THAT(msg, HasSubstr(p));
  EXPECT_THAT(msg, HasSubstr("duplicate JSON key 'a'"));
  const std::string q =
      write("dupfield.safetensors",
            R"({"a": {"dtype": "F32", "dtype": "F16", "shape": [1], "data_offsets": [0, 4]}})", 4);
  EXPECT_THAT(error_of(q), HasSubstr("duplicate JSON key 'dtype'"));
}

TEST_F(SafetensorsHostile, AContiguousFileWithEmptyTensorsStillOpens) {
  const std::string p = write("ok.safetensors",
                              R"({"e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},
                                  "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                  "b": {"dtype": "I8", "shape": [2], "data_offsets": [4, 6]}})",
                              6);
  EXPECT_EQ(error_of(p), "(opened without error)");
}

}  // namespace safetensors_hostile_test
}  // namespace
}  // namespace snug

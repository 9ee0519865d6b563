// OutputFile (io/output_file.h): where bytes land, and that nothing is left behind on failure.
#include "io/output_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

namespace snug {
namespace {
namespace output_file_test {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("snug_output_file_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file(const std::string& name) const { return (dir_ / name).string(); }
  std::string slurp(const std::string& p) const {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  size_t entries() const {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_)) ++n;
    return n;
  }
  fs::path dir_;
};

TEST_F(OutputFileTest, WithoutCommitTheTargetIsUntouchedAndNoTemporaryRemains) {
  const std::string p = file("r.json");
  write_output_file(p, "old", "r");
  {
    OutputFile f(p, "r");
    f.write("new content");
    EXPECT_EQ(fs::path(f.writing_to()).parent_path(), dir_);  // beside the target
    EXPECT_EQ(entries(), 2u);
  }
  EXPECT_EQ(slurp(p), "old");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(OutputFileTest, KeepsTheModeOfAnExistingFile) {
  const std::string p = file("private.json");
  write_output_file(p, "a", "p");
  ASSERT_EQ(::chmod(p.c_str(), 0600), 0);
  write_output_file(p, "b", "p");
  EXPECT_EQ(fs::status(p).permissions(), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(slurp(p), "b");
}

TEST_F(OutputFileTest, ChainedSymlinksLeadToTheFinalTarget) {
  const std::string target = file("t.json"), a = file("a"), b = file("b");
  fs::create_symlink("t.json", b);  // relative, resolved against the link's directory
  fs::create_symlink(b, a);
  write_output_file(a, "x", "a");
  EXPECT_TRUE(fs::is_symlink(a));
  EXPECT_TRUE(fs::is_symlink(b));
  EXPECT_EQ(slurp(target), "x");
  fs::create_symlink(file("loop2"), file("loop1"));
  fs::create_symlink(file("loop1"), file("loop2"));
  try {
    write_output_file(file("loop1"), "x", "loop");
    ADD_FAILURE() << "a symlink loop was written";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("too many levels of symbolic links"));
  }
}

TEST_F(OutputFileTest, DirectoryAndReaderlessFifoAreRefusedWithoutLeftovers) {
  try {
    write_output_file(dir_.string(), "x", "out");
    ADD_FAILURE() << "a directory was written";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("is a directory"));
  }
  const std::string fifo = file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    write_output_file(fifo, "x", "out");  // no reader: refused at once, not waited on
    ADD_FAILURE() << "a FIFO without a reader was written";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot open"));
  }
  EXPECT_EQ(entries(), 1u);  // the FIFO only
}

TEST_F(OutputFileTest, DevNullIsWrittenNotReplaced) {
  write_output_file("/dev/null", "discarded", "null");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

}  // namespace output_file_test
}  // namespace
}  // namespace snug

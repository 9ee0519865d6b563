// Where `--report-json` (and every other output flag) writes (issue 15): a symbolic link stays a
// link and its target gets the report; a device is written to, never replaced by a regular file;
// a failed write leaves no temporary file behind.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace output_file_cli_test {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const char* kQuickRun = "train --device meta --max-steps 1 --report-json ";

TEST(OutputFileCli, ReportThroughASymlinkKeepsTheLink) {
  TempDir tmp;
  const std::string target = tmp.path("real.json"), link = tmp.path("link.json");
  fs::create_symlink(target, link);  // dangling until the report is written
  CliResult r = run_snug(kQuickRun + link);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_json(target)["steps"], 1);
  r = run_snug(kQuickRun + link);  // again, now onto an existing target
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_json(link)["steps"], 1);
}

TEST(OutputFileCli, ReportOntoADeviceWritesToTheDevice) {
  TempDir tmp;
  // Through a link, so that the device itself is never at stake in this test.
  const std::string link = tmp.path("null.json");
  fs::create_symlink("/dev/null", link);
  const CliResult r = run_snug(kQuickRun + link);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  for (const auto& e : fs::directory_iterator(fs::path(tmp.path("x")).parent_path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
}

TEST(OutputFileCli, FailedReportLeavesNoTemporaryFile) {
  TempDir tmp;
  const std::string dir = tmp.path("a-directory");
  fs::create_directory(dir);
  const CliResult r = run_snug(kQuickRun + dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(dir));
  EXPECT_THAT(r.err, HasSubstr("is a directory"));
  for (const auto& e : fs::directory_iterator(fs::path(dir).parent_path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  EXPECT_TRUE(fs::is_directory(dir));
}

}  // namespace output_file_cli_test
}  // namespace
}  // namespace snug::test

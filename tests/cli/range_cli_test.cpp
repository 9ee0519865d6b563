// Flag values that overflow a size or a count (issue 15): refused by flag and value, never
// wrapped into a negative capacity, a single step or a wrong parameter count.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace range_cli_test {

using ::testing::HasSubstr;

TEST(RangeCli, DeviceMemoryBeyond64BitsIsRefused) {
  for (const char* v : {"1e19", "inf", "nan", "20000000TB"}) {
    const CliResult r =
        run_snug(std::string("train --max-steps 1 --device meta --device-memory ") + v);
    EXPECT_EQ(r.exit_code, 1) << v << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr(std::string("--device-memory '") + v + "'")) << v;
    EXPECT_THAT(r.err, HasSubstr("out of range")) << v;
  }
}

TEST(RangeCli, EpochsThatOverflowTheStepCountAreRefused) {
  for (const char* v : {"1e16", "inf"}) {
    const CliResult r = run_snug(std::string("train --device meta --num-train-epochs ") + v);
    EXPECT_EQ(r.exit_code, 1) << v << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("--num-train-epochs")) << v;
    EXPECT_THAT(r.err, HasSubstr("out of range")) << v;
  }
}

TEST(RangeCli, ShapeThatOverflowsTheParameterCountIsRefused) {
  CliResult r = run_snug("plan --n-embd 4294967296 --n-head 1");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--n-embd 4294967296"));
  // Beyond the flags' declared ranges (n_embd at most 131072), a config.json key can still ask.
  r = run_snug(
      "plan --config-override n_embd=2000000000 --config-override n_head=1 --config-override "
      "n_layer=1000000");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_THAT(r.err, HasSubstr("parameters"));
  EXPECT_THAT(r.err, HasSubstr("n_embd=2000000000"));
}

TEST(RangeCli, MaxStepsZeroTrainsByEpochsAndHelpSaysSo) {
  const CliResult help = run_snug("train --help");
  EXPECT_THAT(help.out, HasSubstr("0 or -1: train --num-train-epochs epochs"));
  TempDir tmp;
  const std::string report = tmp.path("r.json");
  const CliResult r =
      run_snug("train --device meta --max-steps 0 --num-train-epochs 1 --report-json " + report);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(read_json(report)["total_steps"].get<int64_t>(), 1);
}

}  // namespace range_cli_test
}  // namespace
}  // namespace snug::test

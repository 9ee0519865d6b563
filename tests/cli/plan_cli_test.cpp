// `snug plan`: a dry run of the training flags with a fit verdict per device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace plan_cli_test {

using ::testing::HasSubstr;

TEST(PlanCli, VerdictAndAlternativesAsJson) {
  TempDir tmp;
  const std::string path = tmp.path("plan.json");
  const CliResult r = run_snug(
      "plan --model gpt2-tiny --per-device-train-batch-size 8 "
      "--seq-len 128 --device-memory 20MB --json " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("DOES NOT FIT"));
  std::ifstream in(path);
  const nlohmann::json j = nlohmann::json::parse(in);
  ASSERT_EQ(j["devices"].size(), 1u);
  EXPECT_FALSE(j["devices"][0]["fits"].get<bool>());
  EXPECT_EQ(j["devices"][0]["runtime_overhead_bytes"], 0);  // a size, not a GPU preset
  EXPECT_GT(j["what_if"].size(), 0u);
  // The plan's peak is the same number a training run on meta reports.
  const std::string report = tmp.path("train.json");
  ASSERT_EQ(run_snug("train --device meta --max-steps 2 --per-device-train-batch-size 8 "
                     "--seq-len 128 --report-json " +
                     report)
                .exit_code,
            0);
  std::ifstream rin(report);
  EXPECT_EQ(nlohmann::json::parse(rin)["memory"]["peak_bytes"], j["memory"]["peak_bytes"]);
}

// Issue 5, acceptance 1: the plan's peak is a real cpu run's measured peak, to the byte, for
// precision x checkpointing x optimizer x accumulation.
TEST(PlanCli, PeakEqualsARealRunsMeasuredPeakForSevenConfigs) {
  TempDir tmp;
  const std::string base =
      " --model gpt2-tiny --data builtin --per-device-train-batch-size 4 --seq-len 48";
  const char* configs[] = {
      "",
      " --bf16",
      " --gradient-checkpointing",
      " --bf16 --gradient-checkpointing --checkpoint-policy selective",
      " --fp16 --optim adafactor",
      " --gradient-accumulation-steps 3 --optim adamw_bnb_8bit",
      " --bf16 --optim lion --gradient-checkpointing --checkpoint-policy sqrt",
  };
  int i = 0;
  for (const char* extra : configs) {
    SCOPED_TRACE(extra);
    const PlanAndTrain r = plan_and_train(tmp, base + extra, std::to_string(i++));
    EXPECT_TRUE(plan_equals_run(r));
  }
}

TEST(PlanCli, AllGpusAddsTheRuntimeOverheadLine) {
  const CliResult r = run_snug("plan --model gpt2-124m --all-gpus");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("h100-80gb"));
  EXPECT_THAT(r.out, HasSubstr("runtime 1343"));
}

}  // namespace plan_cli_test
}  // namespace
}  // namespace snug::test

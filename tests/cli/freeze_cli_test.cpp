// `--freeze` on `snug plan` and `snug train`: the patterns and the trainable count in the JSON's
// config, exact gradient and optimizer bytes, and one clear message for a pattern that matches
// nothing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace freeze_cli_test {

using ::testing::HasSubstr;

// gpt2-124m: wte 50257x768, wpe 1024x768, ln_f 2x768 stay trainable.
constexpr int64_t kGpt2SmallOutsideBlocks = 50257 * 768 + 1024 * 768 + 2 * 768;

TEST(FreezeCli, PlanReportsPatternsTrainableCountAndExactBytes) {
  TempDir tmp;
  const std::string path = tmp.path("plan.json");
  const CliResult r = run_snug(
      "plan --model gpt2-124m --seq-len 64 --per-device-train-batch-size 1 "
      "--freeze 'transformer.h.*' --json " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("--freeze: 39385344 of 124439808 parameters train"));
  const nlohmann::json j = read_json(path);
  EXPECT_EQ(j["config"]["freeze"], nlohmann::json::array({"transformer.h.*"}));
  EXPECT_EQ(j["config"]["trainable_params"], kGpt2SmallOutsideBlocks);
  EXPECT_EQ(j["memory"]["max_by_category"]["gradients"], 4 * kGpt2SmallOutsideBlocks);
  EXPECT_EQ(j["memory"]["max_by_category"]["optimizer_state"], 8 * kGpt2SmallOutsideBlocks);
}

TEST(FreezeCli, TrainReportListsPatternsAndPatternMatchingNothingFails) {
  TempDir tmp;
  const std::string path = tmp.path("report.json");
  CliResult r = run_snug(
      "train --max-steps 2 --seq-len 32 --per-device-train-batch-size 2 "
      "--freeze 'transformer.h.0.*' --freeze transformer.wpe --report-json " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = read_json(path);
  EXPECT_EQ(j["config"]["freeze"], nlohmann::json::array({"transformer.h.0.*", "transformer.wpe"}));
  EXPECT_EQ(j["config"]["trainable_params"], j["model"]["n_trainable_params"]);
  EXPECT_LT(j["model"]["n_trainable_params"].get<int64_t>(), j["model"]["n_params"].get<int64_t>());
  EXPECT_EQ(j["memory"]["max_by_category"]["gradients"],
            4 * j["model"]["n_trainable_params"].get<int64_t>());

  r = run_snug("train --max-steps 1 --freeze 'transformer.h.0.*' --freeze 'h.0.*'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--freeze 'h.0.*' matches no parameter"));
}

}  // namespace freeze_cli_test
}  // namespace
}  // namespace snug::test

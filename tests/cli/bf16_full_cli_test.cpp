// --bf16-full through the CLI: `snug plan` equals a real run's measured peak to the byte (issue 5
// acceptance 1, with bf16 parameters); the 70B line of seed 004's table (fp16 weights 140 GB +
// gradients 140 GB + Adam 280 GB) reproduced by flags on a 70B-shaped GPT-2 (issue 5 acceptance
// 2); and the report's precision keys.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace bf16_full_cli_test {

TEST(PlanCli, PeakEqualsARealRunsMeasuredPeakWithBf16Full) {
  TempDir tmp;
  const std::string base =
      " --model gpt2-tiny --data builtin --per-device-train-batch-size 4 --seq-len 48 --bf16-full";
  const char* configs[] = {
      "",
      " --gradient-checkpointing --gradient-accumulation-steps 2",
      " --optim sgd --momentum 0.9 --gradient-checkpointing --checkpoint-policy selective",
  };
  int i = 0;
  for (const char* extra : configs) {
    SCOPED_TRACE(extra);
    const PlanAndTrain r = plan_and_train(tmp, base + extra, std::to_string(i++));
    ASSERT_TRUE(plan_equals_run(r));
    const nlohmann::json& tj = r.train_json;
    // The report names the precision: bf16 compute, bf16 parameters.
    EXPECT_EQ(tj["compute_dtype"], "bf16");
    EXPECT_EQ(tj["param_dtype"], "bf16");
    EXPECT_EQ(tj["config"]["bf16_full"], true);
    const int64_t P = tj["config"]["trainable_params"].get<int64_t>();
    EXPECT_EQ(tj["memory"]["max_by_category"]["weights"], 2 * P);
    EXPECT_EQ(tj["memory"]["max_by_category"]["gradients"], 2 * P);
  }
  const std::string f32 = tmp.path("f32.json");
  ASSERT_EQ(run_snug("train --model gpt2-tiny --max-steps 1 --report-json " + f32).exit_code, 0);
  EXPECT_EQ(read_json(f32)["param_dtype"], "f32");
  EXPECT_EQ(read_json(f32)["compute_dtype"], "fp32");
}

TEST(PlanCli, SeventyBLineOfSeed004WithBf16Full) {
  // Seed 004: "70B model, FP16 + Adam: parameters 140 GB, gradients 140 GB, optimizer state
  // 280 GB (2P + 2P + 4P)". A GPT-2-shaped 70B: 80 layers of width 8192 (64 heads), Llama's
  // 32000-token vocabulary, 2048 positions.
  TempDir tmp;
  const std::string json = tmp.path("plan.json");
  const CliResult r = run_snug(
      "plan --model gpt2-124m --n-layer 80 --n-embd 8192 --n-head 64 --vocab-size 32000 "
      "--n-positions 2048 --seq-len 2048 --per-device-train-batch-size 1 "
      "--gradient-checkpointing --bf16-full --optim adamw --json " +
      json);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = read_json(json);
  const int64_t C = 8192, L = 80, V = 32000, NP = 2048;
  const int64_t P = V * C + NP * C + L * (12 * C * C + 13 * C) + 2 * C;
  EXPECT_EQ(P, 64711966720);  // 64.7B: a GPT-2 block (4C MLP, biases), not Llama's 69B
  EXPECT_EQ(j["config"]["trainable_params"], P);
  const nlohmann::json& m = j["memory"]["max_by_category"];
  EXPECT_EQ(m["weights"], 2 * P);
  EXPECT_EQ(m["gradients"], 2 * P);
  EXPECT_EQ(m["optimizer_state"], 4 * P);
  std::printf(
      "70B-shaped GPT-2, --bf16-full AdamW: P = %lld; weights %.1f GB, gradients %.1f GB, "
      "optimizer %.1f GB (seed 004: 140 / 140 / 280 GB at P = 70e9)\n",
      static_cast<long long>(P), 2e-9 * static_cast<double>(P), 2e-9 * static_cast<double>(P),
      4e-9 * static_cast<double>(P));
}

}  // namespace bf16_full_cli_test
}  // namespace
}  // namespace snug::test

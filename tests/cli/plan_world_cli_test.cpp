// `snug plan --world-size N --zero-stage K` (issue 30): the plan of one data-parallel rank. Its
// peak against a real `mpirun -np 2` run is held to the byte by the mpi-labelled
// tests/dist/stage0_check.cpp; here, what needs no MPI.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace plan_world_cli_test {

using ::testing::HasSubstr;
using ::testing::Not;

nlohmann::json plan_json(TempDir& tmp, const std::string& flags) {
  const std::string path = tmp.path("plan.json");
  const CliResult r = run_snug("plan --model gpt2-tiny --seq-len 64 " + flags + " --json " + path);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Rank 0 of 2 holds what one process holds, plus the gradient bucket (temporary) while the
// gradients are summed (to the byte against a real run: the mpi test); a world of one has no bucket
// and is the plain plan.
TEST(PlanWorldCli, WorldOfTwoAddsTheGradientBucketAsTemporary) {
  TempDir tmp;
  const nlohmann::json one = plan_json(tmp, "--per-device-train-batch-size 2");
  const nlohmann::json one_again = plan_json(tmp, "--per-device-train-batch-size 2 --world-size 1");
  const nlohmann::json two = plan_json(tmp, "--per-device-train-batch-size 2 --world-size 2");
  EXPECT_EQ(one["memory"]["peak_bytes"], one_again["memory"]["peak_bytes"]);
  EXPECT_EQ(two["world_size"], 2);
  EXPECT_EQ(two["zero_stage"], 0);
  // gpt2-tiny's gradients fit one bucket under the 25 MiB default: the bucket is their size,
  // allocated during backward (its all-reduce overlaps it), beside backward's own temporaries.
  const int64_t grads = two["memory"]["max_by_category"]["gradients"];
  const int64_t temp_one = one["memory"]["max_by_category"]["temporary"];
  const int64_t temp_two = two["memory"]["max_by_category"]["temporary"];
  EXPECT_GE(temp_two, grads);
  EXPECT_GT(temp_two, temp_one);
  EXPECT_LE(temp_two, temp_one + grads);
  EXPECT_GT(two["memory"]["peak_bytes"].get<int64_t>(), one["memory"]["peak_bytes"].get<int64_t>());
}

// ZeRO stages 1 and 2 on meta: rank 0 of 4 keeps a quarter of the padded flat length's AdamW
// state (8 bytes an element) and, at stage 2, of its gradients (4 bytes), padded(P, N) =
// ceil(P / 2N) * 2N; the weights are the padded flat buffer. To the byte against a real run: the
// mpi tests.
TEST(PlanWorldCli, ZeroStagesShardTheStateAndTheGradients) {
  TempDir tmp;
  const nlohmann::json one = plan_json(tmp, "--per-device-train-batch-size 2");
  const int64_t P = one["config"]["trainable_params"];
  const int64_t padded = (P + 7) / 8 * 8;
  EXPECT_EQ(one["memory"]["max_by_category"]["optimizer_state"], 8 * P);
  for (const int stage : {1, 2}) {
    const nlohmann::json z =
        plan_json(tmp, "--per-device-train-batch-size 2 --world-size 4 --zero-stage " +
                           std::to_string(stage));
    EXPECT_EQ(z["zero_stage"], stage);
    EXPECT_EQ(z["memory"]["max_by_category"]["optimizer_state"], 8 * padded / 4) << stage;
    if (stage == 2) {
      EXPECT_EQ(z["memory"]["max_by_category"]["gradients"], 4 * padded / 4);
    }
  }
}

// ZeRO stage 3 on meta: rank 0 of 4 keeps its slices of every trainable parameter, each padded
// on its own to a multiple of 4 (at most 3 elements each), so outside a gathered block (the
// plan's final memory) its weights are 4 * padded / 4 = padded bytes, its AdamW state twice that
// and its gradients as much. To the byte against a real run: the mpi tests.
TEST(PlanWorldCli, ZeroStageThreeShardsTheParametersToo) {
  TempDir tmp;
  const nlohmann::json one = plan_json(tmp, "--per-device-train-batch-size 2");
  const int64_t P = one["config"]["trainable_params"];
  const nlohmann::json z =
      plan_json(tmp, "--per-device-train-batch-size 2 --world-size 4 --zero-stage 3");
  EXPECT_EQ(z["zero_stage"], 3);
  const int64_t padded = z["memory"]["final_by_category"]["weights"];
  EXPECT_GE(padded, P);
  EXPECT_LT(padded, P + 3 * 52);  // gpt2-tiny's 52 tensors
  EXPECT_EQ(padded % 4, 0);
  EXPECT_EQ(z["memory"]["max_by_category"]["optimizer_state"], 8 * padded / 4);
  EXPECT_EQ(z["memory"]["max_by_category"]["gradients"], 4 * padded / 4);
  const CliResult bad = run_snug("plan --model gpt2-tiny --zero-stage 4");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("--zero-stage"));
}

// The what-if rows (and the memory timeline) of a rank's plan are rank 0's of the same world: each
// is the plan the row's flags would give (`--world-size 4 --zero-stage 2` plus the flag), so its
// saving is against like. Replayed as one process, they were compared with the sharded rank's peak
// and every switch seemed to cost memory.
TEST(PlanWorldCli, WhatIfRowsAreRanksOfTheSameWorld) {
  TempDir tmp;
  const std::string rank = "--per-device-train-batch-size 2 --world-size 4 --zero-stage 2";
  const nlohmann::json z = plan_json(tmp, rank + " --device-memory 1MiB");
  ASSERT_TRUE(z["what_if"].is_array());
  bool checkpointing = false;
  for (const nlohmann::json& row : z["what_if"]) {
    if (row["flags"] != "--gradient-checkpointing") continue;
    checkpointing = true;
    const nlohmann::json with = plan_json(tmp, rank + " --gradient-checkpointing");
    EXPECT_EQ(row["peak_bytes"], with["memory"]["peak_bytes"]);
    EXPECT_GT(row["saves_bytes"].get<int64_t>(), 0);
  }
  EXPECT_TRUE(checkpointing) << z["what_if"].dump();
  // The memory timeline is rank 0's too: its peak is the plan's.
  const std::string timeline = tmp.path("timeline.json");
  const nlohmann::json with_timeline = plan_json(tmp, rank + " --memory-timeline " + timeline);
  std::ifstream in(timeline);
  EXPECT_EQ(nlohmann::json::parse(in)["peak_bytes"], with_timeline["memory"]["peak_bytes"]);
}

// A plan of flags a real run refuses for a feature not built yet (--offload-optimizer cpu on a
// GPU: the update on the host) still gives their bytes but says, in the run's own words
// (OffloadOptimizer.RefusalsNameTheFlag holds the run to them), that it is a plan only; so do its
// ZeRO rows over more ranks.
TEST(PlanWorldCli, PlanOfARunNotBuiltYetSaysSoInTheRunsWords) {
  TempDir tmp;
  const std::string flags = "--per-device-train-batch-size 2 --device cuda --offload-optimizer cpu";
  const std::string why = "--offload-optimizer cpu with --device cuda";
  const CliResult plan = run_snug("plan --model gpt2-tiny --seq-len 64 " + flags);
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  EXPECT_THAT(plan.out, HasSubstr("plan only: a real run of these flags is refused today: " + why));
  const nlohmann::json j = plan_json(tmp, flags);
  EXPECT_THAT(j["plan_only"].get<std::string>(), HasSubstr(why));
  EXPECT_GT(j["memory"]["peak_bytes"].get<int64_t>(), 0);
  EXPECT_TRUE(
      plan_json(tmp, "--per-device-train-batch-size 2 --device cuda")["plan_only"].is_null());
  const nlohmann::json advised =
      plan_json(tmp, flags + " --device-memory 10MiB --advise --gemm-gflops 100");
  int rows = 0;
  for (const nlohmann::json& row : advised["advice"]["zero"]) {
    if (row["stage"] == 0 || row["world_size"].is_null()) continue;
    ++rows;
    EXPECT_EQ(row["source"], "replay") << row.dump();
    EXPECT_THAT(row["note"].get<std::string>(), HasSubstr("plan only: " + why)) << row.dump();
  }
  EXPECT_GT(rows, 0) << advised["advice"]["zero"].dump();
}

// bf16 weights and gradients run over ranks (docs/distributed.md): --bf16-full is a what-if row
// of an fp32 rank of 2, a --bf16-full run at stage 2 trains on one process, and its ZeRO rows
// over more ranks are exact replays with nothing to add.
TEST(PlanWorldCli, BfloatWeightsAreRunsAtEveryStage) {
  TempDir tmp;
  const nlohmann::json fp32 = plan_json(
      tmp, "--per-device-train-batch-size 2 --world-size 2 --zero-stage 1 --device-memory 1MiB");
  ASSERT_TRUE(fp32["what_if"].is_array());
  bool bf16_full = false;
  for (const nlohmann::json& row : fp32["what_if"])
    bf16_full = bf16_full || row["flags"] == "--bf16-full";
  EXPECT_TRUE(bf16_full) << fp32["what_if"].dump();
  const std::string flags = "--per-device-train-batch-size 2 --bf16-full --zero-stage 2";
  const CliResult run = run_snug("train --model gpt2-tiny --seq-len 64 --max-steps 1 " + flags);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(plan_json(tmp, flags)["plan_only"].is_null());
  const nlohmann::json advised =
      plan_json(tmp,
                "--per-device-train-batch-size 2 --bf16-full --device-memory 7MiB --advise "
                "--gemm-gflops 100");
  int rows = 0;
  for (const nlohmann::json& row : advised["advice"]["zero"]) {
    if (row["stage"] == 0 || row["world_size"].is_null()) continue;
    ++rows;
    EXPECT_EQ(row["source"], "replay") << row.dump();
    EXPECT_THAT(row.value("note", std::string()), Not(HasSubstr("plan only"))) << row.dump();
  }
  EXPECT_GT(rows, 0) << advised["advice"]["zero"].dump();  // stage 3 fits 7 MiB over 64 ranks
}

// --advise searches the ZeRO stages with --bf16-full beside the run's own flags (bf16 weights,
// gradients and state shard at every stage): each replayed row is `snug plan` of those flags at
// that stage and world, to the byte. A run that trains bf16 weights already, or adapters, gets
// none.
TEST(PlanWorldCli, AdviceSearchesTheStagesWithBfloatWeightsToo) {
  TempDir tmp;
  const std::string advise = " --device-memory 7MiB --advise --gemm-gflops 100";
  const nlohmann::json j = plan_json(tmp, "--per-device-train-batch-size 2" + advise);
  ASSERT_EQ(j["advice"]["zero_with"].size(), 1u) << j["advice"].dump();
  const nlohmann::json& with = j["advice"]["zero_with"][0];
  EXPECT_EQ(with["flags"], "--bf16-full");
  ASSERT_EQ(with["rows"].size(), 4u);
  int replayed = 0;
  for (const nlohmann::json& row : with["rows"]) {
    if (row["source"] != "replay" || row["world_size"].is_null()) continue;
    ++replayed;
    const nlohmann::json plan =
        plan_json(tmp, "--per-device-train-batch-size 2 --bf16-full --zero-stage " +
                           row["stage"].dump() + " --world-size " + row["world_size"].dump());
    EXPECT_EQ(plan["memory"]["peak_bytes"], row["peak_bytes"]) << row.dump();
  }
  EXPECT_GT(replayed, 0) << with.dump();
  const CliResult text =
      run_snug("plan --model gpt2-tiny --seq-len 64 --per-device-train-batch-size 2" + advise);
  EXPECT_THAT(text.out, HasSubstr("ZeRO over more ranks with --bf16-full (the run's flags with "
                                  "--bf16-full, per-rank batch;"));
  for (const char* own : {" --bf16-full", " --lora-r 8"})
    EXPECT_TRUE(plan_json(tmp, std::string("--per-device-train-batch-size 2") + own +
                                   advise)["advice"]["zero_with"]
                    .empty())
        << own;
}

}  // namespace plan_world_cli_test
}  // namespace
}  // namespace snug::test

// --device cuda where this machine may have no GPU (CI never has one): `snug plan --device cuda`
// is the same meta replay as for cpu, with the CUDA backend's workspace named beside the peak;
// `snug train --device cuda` without a GPU stops before step 1 naming why; `snug info` lists the
// GPUs or says why there are none (issue 27).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "kernels/cuda/cuda_backend.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace device_cuda_cli_test {

using test::run_snug;
using test::run_snug_env;
using ::testing::HasSubstr;

nlohmann::json read_json(const std::string& path) {
  return nlohmann::json::parse(test::slurp(path));
}

TEST(DeviceCudaCli, PlanNeedsNoGpuAndNamesTheWorkspace) {
  test::TempDir dir;
  const std::string flags = " --model gpt2-tiny --seq-len 64 --per-device-train-batch-size 2";
  const auto cpu = run_snug("plan --device cpu" + flags + " --json " + dir.path("cpu.json"));
  const auto gpu = run_snug("plan --device cuda" + flags + " --json " + dir.path("gpu.json"));
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  EXPECT_THAT(gpu.out, HasSubstr("cuBLASLt's workspace (32.00 MiB)"));
  EXPECT_THAT(gpu.out, HasSubstr("of 2 MiB pages"));
  EXPECT_THAT(cpu.out, ::testing::Not(HasSubstr("of 2 MiB pages")));
  const auto c = read_json(dir.path("cpu.json"));
  const auto g = read_json(dir.path("gpu.json"));
  EXPECT_EQ(g["memory"]["peak_bytes"], c["memory"]["peak_bytes"]);
  EXPECT_EQ(g["cuda"]["library_workspace_bytes"], int64_t{32} << 20);
  EXPECT_FALSE(c.contains("cuda"));
  // The GPU's paged arena (core/page_arena.h): the plan states the pages the run will hold.
  ASSERT_TRUE(g["memory"].contains("pages"));
  const auto& pages = g["memory"]["pages"];
  EXPECT_EQ(pages["page_bytes"], int64_t{2} << 20);
  EXPECT_GE(pages["reserved_bytes"].get<int64_t>(), g["memory"]["peak_bytes"].get<int64_t>());
  EXPECT_EQ(pages["reserved_bytes"].get<int64_t>() % (int64_t{2} << 20), 0);
  EXPECT_FALSE(c["memory"].contains("pages"));
}

// SNUG_CUDA_ALLOC picks how a cuda device allocates; only the paged arena has pages to plan, and
// a value it does not know is refused by name.
TEST(DeviceCudaCli, PlanFollowsTheAllocatorTheRunWillUse) {
  test::TempDir dir;
  const std::string flags = " --model gpt2-tiny --seq-len 64 --per-device-train-batch-size 2";
  const auto async = run_snug_env(
      "SNUG_CUDA_ALLOC=async ", "plan --device cuda" + flags + " --json " + dir.path("async.json"));
  ASSERT_EQ(async.exit_code, 0) << async.err;
  EXPECT_FALSE(read_json(dir.path("async.json"))["memory"].contains("pages"));
  const auto bad = run_snug_env("SNUG_CUDA_ALLOC=slab ", "plan --device cuda" + flags);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("SNUG_CUDA_ALLOC='slab'"));
}

// A GPU run's --bf16 products take its own bf16 GEMMs whatever this CPU has
// (kernels::resolve_gemm_path with the device): the plan replays that path (bf16 operand copies
// instead of widened fp32 ones), not this CPU's, and --gemm-path widen still widens.
TEST(DeviceCudaCli, PlanOfABf16GpuRunTakesTheGpusGemms) {
  test::TempDir dir;
  const std::string flags =
      " --model gpt2-tiny --seq-len 64 --per-device-train-batch-size 2 --bf16 --json ";
  const auto plan = [&](const std::string& extra, const std::string& name) {
    const auto r = run_snug("plan --device cuda" + extra + flags + dir.path(name));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return read_json(dir.path(name))["memory"]["peak_bytes"].get<int64_t>();
  };
  const int64_t auto_path = plan("", "auto.json");
  EXPECT_EQ(auto_path, plan(" --gemm-path onednn-bf16", "bf16.json"));
  EXPECT_NE(auto_path, plan(" --gemm-path widen", "widen.json"));
}

// The LM head's chunks are the GPU's (kernels::kLmHeadGpuScratchBudgetFloats): gpt2-124m with
// 4096 rows runs 2 chunks of 2048 rows there against 25 of 164 on the CPU, so the two plans
// differ (a replay that took the host's choices planned the GPU run 377 MB short).
TEST(DeviceCudaCli, PlanReplaysTheGpusLmHeadChunks) {
  test::TempDir dir;
  const std::string flags =
      " --model gpt2-124m --seq-len 1024 --per-device-train-batch-size 4 "
      "--max-steps 1 --json ";
  const auto cpu = run_snug("plan --device cpu" + flags + dir.path("cpu.json"));
  const auto gpu = run_snug("plan --device cuda" + flags + dir.path("gpu.json"));
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  const int64_t c = read_json(dir.path("cpu.json"))["memory"]["peak_bytes"].get<int64_t>();
  const int64_t g = read_json(dir.path("gpu.json"))["memory"]["peak_bytes"].get<int64_t>();
  EXPECT_GT(g, c);
}

TEST(DeviceCudaCli, TrainWithoutAGpuStopsNamingWhy) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  test::TempDir dir;
  const auto r = run_snug("train --device cuda:0 --max-steps 1 --output-dir " + dir.path("o"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--device cuda"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("step 1")));
  const auto bad = run_snug("train --device cuda:x --max-steps 1");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("unknown device 'cuda:x'"));
}

TEST(DeviceCudaCli, InfoListsGpusOrSaysWhyNone) {
  test::TempDir dir;
  const auto r = run_snug("info --json " + dir.path("i.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = read_json(dir.path("i.json"));
  ASSERT_TRUE(j.contains("gpus"));
  if (cuda_device_count() == 0) {
    EXPECT_THAT(r.out, HasSubstr("GPU          none: "));
    EXPECT_TRUE(j["gpus"].empty());
    EXPECT_FALSE(j["gpu_unavailable"].get<std::string>().empty());
  } else {
    EXPECT_THAT(r.out, HasSubstr("GPU cuda:0   "));
    EXPECT_EQ(j["gpus"].size(), static_cast<size_t>(cuda_device_count()));
  }
}

}  // namespace device_cuda_cli_test
}  // namespace
}  // namespace snug

// `snug train` as a user runs it: help, flag errors, the default job's learning, the report's
// keys, and out-of-memory behaviour.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace train_cli_test {

using ::testing::HasSubstr;

TEST(TrainCli, HelpListsCommandsAndEveryFlagWithItsDefault) {
  const CliResult top = run_snug("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_THAT(top.out, HasSubstr("train"));
  const CliResult r = run_snug("train --help");
  EXPECT_EQ(r.exit_code, 0);
  for (const char* flag :
       {"--model", "--data", "--seq-len", "--per-device-train-batch-size", "--max-steps",
        "--learning-rate", "--warmup-steps", "--lr-scheduler-type", "--max-grad-norm",
        "--weight-decay", "--seed", "--device", "--device-memory", "--threads", "--report-json",
        "--log-every", "--optim", "--gradient-accumulation-steps"})
    EXPECT_THAT(r.out, HasSubstr(flag));
  EXPECT_THAT(r.out, HasSubstr("gpt2-tiny"));    // default model shown
  EXPECT_THAT(r.out, HasSubstr("adamw_torch"));  // default optimizer shown
}

TEST(TrainCli, UnknownFlagAndBadValuesAreOneClearMessage) {
  CliResult r = run_snug("train --no-such-flag 3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--no-such-flag"));
  r = run_snug("train --lr-scheduler-type zigzag --max-steps 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("zigzag"));
  r = run_snug("train --model gpt2-huge --max-steps 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("gpt2-huge"));
  r = run_snug("train --optim adamx --max-steps 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("adamx"));
  r = run_snug("train --seq-len 300 --max-steps 1");  // gpt2-tiny has 256 positions
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--seq-len 300"));
}

TEST(TrainCli, DefaultJobLearnsAndReportsEveryKey) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "200 training steps are too slow under AddressSanitizer";
#endif
  TempDir tmp;
  const std::string report = tmp.path("r.json");
  const CliResult r =
      run_snug("train --model gpt2-tiny --data builtin --max-steps 200 --report-json " + report);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("Time: "));
  EXPECT_THAT(r.out, HasSubstr("Samples/second: "));
  EXPECT_THAT(r.out, HasSubstr("Memory occupied: "));
  EXPECT_THAT(r.out, HasSubstr("optimizer_state"));
  const nlohmann::json j = read_json(report);
  for (const char* key : {"model", "config", "steps", "train_runtime", "train_samples_per_second",
                          "tokens_per_second", "loss", "final_loss", "memory", "system"})
    EXPECT_TRUE(j.contains(key)) << key;
  for (const char* key : {"name", "n_params", "n_trainable_params"})
    EXPECT_TRUE(j["model"].contains(key)) << key;
  for (const char* key : {"peak_bytes", "peak_by_category", "max_by_category", "final_by_category",
                          "capacity_bytes", "peak_rss_bytes"})
    EXPECT_TRUE(j["memory"].contains(key)) << key;
  for (const char* key : {"threads", "isa", "gemm_library"})
    EXPECT_TRUE(j["system"].contains(key)) << key;
  EXPECT_TRUE(j["memory"]["capacity_bytes"].is_null());
  EXPECT_EQ(j["config"]["per_device_train_batch_size"], 8);
  EXPECT_EQ(j["config"]["lr_scheduler_type"], "linear");
  EXPECT_EQ(j["steps"], 200);
  ASSERT_EQ(j["loss"].size(), 200u);
  const double first = j["loss"][0], last = j["final_loss"];
  EXPECT_LE(last, 0.7 * first) << "first " << first << " final " << last;
  const int64_t P = j["model"]["n_params"];
  EXPECT_EQ(j["memory"]["max_by_category"]["weights"], 4 * P);
  EXPECT_EQ(j["memory"]["max_by_category"]["gradients"], 4 * P);
  EXPECT_EQ(j["memory"]["max_by_category"]["optimizer_state"], 8 * P);
}

TEST(TrainCli, MetaDeviceMatchesCpuReport) {
  TempDir tmp;
  const std::string flags = "train --max-steps 2 --per-device-train-batch-size 2 --seq-len 32";
  ASSERT_EQ(run_snug(flags + " --report-json " + tmp.path("cpu.json")).exit_code, 0);
  ASSERT_EQ(run_snug(flags + " --device meta --report-json " + tmp.path("meta.json")).exit_code, 0);
  const auto cpu = read_json(tmp.path("cpu.json"))["memory"];
  const auto meta = read_json(tmp.path("meta.json"))["memory"];
  EXPECT_EQ(cpu["peak_bytes"], meta["peak_bytes"]);
  EXPECT_EQ(cpu["peak_by_category"], meta["peak_by_category"]);
}

TEST(TrainCli, DeviceMemoryBelowTheNeedIsOutOfMemory) {
  TempDir tmp;
  const std::string report = tmp.path("oom.json");
  const CliResult r = run_snug("train --max-steps 2 --device-memory 20MB --report-json " + report);
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_THAT(r.err, HasSubstr("out of memory"));
  EXPECT_THAT(r.err, HasSubstr("activations"));
  EXPECT_THAT(r.err, HasSubstr("20000000 bytes"));
  // The report is still written, with the error and the capacity.
  const nlohmann::json j = read_json(report);
  EXPECT_THAT(j["error"].get<std::string>(), HasSubstr("out of memory"));
  EXPECT_EQ(j["memory"]["capacity_bytes"], 20000000);
  // A GPU preset name is accepted as a capacity.
  EXPECT_EQ(run_snug("train --max-steps 1 --device meta --device-memory t4-16gb").exit_code, 0);
  EXPECT_EQ(run_snug("train --max-steps 1 --device-memory lots").exit_code, 1);
}

}  // namespace train_cli_test
}  // namespace
}  // namespace snug::test

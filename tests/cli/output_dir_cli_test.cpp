// --output-dir holds one run's checkpoints (issue 15, defect 4): a new run into a folder with
// another run's checkpoints stops before step 1 (exit 2) unless --overwrite-output-dir, which
// removes them; a resume of the same run is recognised and goes on; --save-total-limit keeps the
// newest N; and replacing an existing checkpoint never leaves a moment without a complete one.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "support/run_cli.h"
#include "train/checkpoint.h"

namespace snug::test {
namespace {
namespace output_dir_cli_test {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kRun =
    "train --model gpt2-tiny --data builtin --seq-len 32 --per-device-train-batch-size 2 "
    "--log-every 1";

std::string model_hash(const std::string& checkpoint) {
  return std::to_string(fnv1a64_file(checkpoint + "/model.safetensors"));
}

TEST(OutputDirCli, NewRunIntoAnotherRunsCheckpointsStopsUnlessOverwrite) {
  TempDir tmp;
  const std::string out = tmp.path("out");
  CliResult r = run_snug(kRun + " --seed 1 --max-steps 6 --save-steps 3 --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string old3 = model_hash(out + "/checkpoint-3"),
                    old6 = model_hash(out + "/checkpoint-6");

  // Another run (and the same flags started afresh: also a new run) stops before step 1.
  for (const char* seed : {"2", "1"}) {
    r = run_snug(kRun + " --seed " + seed + " --max-steps 3 --save-steps 3 --output-dir " + out);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_THAT(r.err, HasSubstr(out));
    EXPECT_THAT(r.err, HasSubstr("--overwrite-output-dir"));
    EXPECT_THAT(r.out, ::testing::Not(HasSubstr("step 1/")));
    EXPECT_EQ(model_hash(out + "/checkpoint-3"), old3);
    EXPECT_EQ(model_hash(out + "/checkpoint-6"), old6);
  }

  // A resume of the same run into its own folder goes on.
  r = run_snug(kRun + " --seed 1 --max-steps 6 --save-steps 3 --resume-from " + out +
               "/checkpoint-3 --output-dir " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(model_hash(out + "/checkpoint-6"), old6) << "the resumed run is not bit-exact";

  // --overwrite-output-dir on a resume keeps the run's own checkpoints (the one it resumes from).
  r = run_snug(kRun + " --seed 1 --max-steps 6 --save-steps 3 --overwrite-output-dir " +
               "--resume-from " + out + "/checkpoint-3 --output-dir " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(model_hash(out + "/checkpoint-3"), old3);
  EXPECT_EQ(model_hash(out + "/checkpoint-6"), old6);

  // --overwrite-output-dir: the old run's checkpoints go, none of them is left to mix with.
  r = run_snug(kRun + " --seed 2 --max-steps 3 --save-steps 3 --overwrite-output-dir " +
               "--output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(out + "/checkpoint-6"));
  EXPECT_NE(model_hash(out + "/checkpoint-3"), old3);
  EXPECT_EQ(fs::path(resolve_checkpoint(out)).filename(), "checkpoint-3");
}

TEST(OutputDirCli, SaveTotalLimitKeepsTheNewestCheckpoints) {
  TempDir tmp;
  const std::string out = tmp.path("out"), report = tmp.path("r.json");
  const CliResult r = run_snug(kRun + " --max-steps 5 --save-steps 1 --save-total-limit 2" +
                               " --output-dir " + out + " --report-json " + report);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int step = 1; step <= 5; ++step)
    EXPECT_EQ(fs::exists(out + "/checkpoint-" + std::to_string(step)), step >= 4) << step;
  const nlohmann::json j = read_json(report);
  EXPECT_EQ(j["config"]["save_total_limit"], 2);
  EXPECT_EQ(j["config"]["overwrite_output_dir"], false);
  const CliResult help = run_snug("train --help");
  EXPECT_THAT(help.out, HasSubstr("--save-total-limit"));
  EXPECT_THAT(help.out, HasSubstr("--overwrite-output-dir"));
}

// A resumed run saves checkpoint-6 again over the one there. SNUG_TEST_CRASH_DURING_REPLACE=6
// kills it (SIGKILL) between moving the old checkpoint-6 aside and renaming the new one in: the
// output dir must still resolve to a complete checkpoint, the old checkpoint-6 bit for bit.
TEST(OutputDirCli, KillWhileReplacingACheckpointLeavesACompleteOne) {
  TempDir tmp;
  const std::string out = tmp.path("out");
  const std::string run = kRun + " --max-steps 6 --save-steps 3 --output-dir " + out;
  CliResult r = run_snug(run);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string old6 = model_hash(out + "/checkpoint-6");

  ASSERT_EQ(::setenv("SNUG_TEST_CRASH_DURING_REPLACE", "6", 1), 0);
  r = run_snug(run + " --resume-from " + out + "/checkpoint-3");
  ::unsetenv("SNUG_TEST_CRASH_DURING_REPLACE");
  EXPECT_NE(r.exit_code, 0) << "the kill did not happen";
  EXPECT_FALSE(fs::exists(out + "/checkpoint-6")) << "killed before the old one was set aside";
  const std::string resolved = resolve_checkpoint(out);
  EXPECT_EQ(fs::path(resolved).filename().string().rfind("checkpoint-6", 0), 0u) << resolved;
  EXPECT_EQ(model_hash(resolved), old6);

  // --resume-from DIR picks it and goes on.
  r = run_snug(kRun + " --max-steps 7 --save-steps 7 --output-dir " + out + " --resume-from " +
               out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out + "/checkpoint-7/trainer_state.json"));
}

}  // namespace output_dir_cli_test
}  // namespace
}  // namespace snug::test

// What a run may do to its --output-dir (issue 29, item 7): --overwrite-output-dir removes only
// the folders snug wrote; --save-total-limit retires a checkpoint so that a kill -9 in the middle
// leaves it whole or recognisably gone; and a second job writing into the folder is refused by
// the output dir's lock, naming the holder, while the ranks of one job (SNUG_JOB_ID) share it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/run_cli.h"
#include "train/output_dir_lock.h"

namespace snug::test {
namespace {
namespace output_dir_safety_cli_test {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kRun =
    "train --model gpt2-tiny --data builtin --seq-len 16 --per-device-train-batch-size 2 "
    "--threads 1";

// --overwrite-output-dir deleted any folder named checkpoint-*, a user's checkpoint-notes/ too.
TEST(OutputDirSafetyCli, OverwriteRemovesOnlyWhatSnugWrote) {
  TempDir tmp;
  const std::string out = tmp.path("out");
  ASSERT_EQ(run_snug(kRun + " --max-steps 1 --save-steps 1 --output-dir " + out, 120).exit_code, 0);
  fs::create_directories(out + "/checkpoint-notes");
  std::ofstream(out + "/checkpoint-notes/todo.txt") << "mine\n";
  fs::create_directories(out + "/checkpoint-7");  // no trainer_state.json: not snug's
  const CliResult r = run_snug(
      kRun + " --seed 2 --max-steps 1 --save-steps 1 --overwrite-output-dir --output-dir " + out,
      120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("--overwrite-output-dir: removed " + out + "/checkpoint-1\n"));
  EXPECT_TRUE(fs::exists(out + "/checkpoint-notes/todo.txt"));
  EXPECT_TRUE(fs::exists(out + "/checkpoint-7"));
  EXPECT_TRUE(fs::exists(out + "/checkpoint-1/trainer_state.json"));  // the new run's
}

// A kill -9 while --save-total-limit removed checkpoint-1 left it half-deleted and still listed
// as complete (its trainer_state.json outlived its model.safetensors), so a resume picked a
// broken checkpoint or its removal counted it. Renamed to checkpoint-1.deleting first, it is
// recognisably gone; the resume takes checkpoint-2 and the next rotation finishes the removal.
TEST(OutputDirSafetyCli, RotationKilledHalfWayLeavesNoHalfCheckpoint) {
  TempDir tmp;
  const std::string out = tmp.path("out");
  const std::string run =
      kRun + " --max-steps 3 --save-steps 1 --save-total-limit 1 --output-dir " + out;
  CliResult r = run_snug_env("SNUG_TEST_CRASH_DURING_ROTATE=1 ", run, 120);
  ASSERT_NE(r.exit_code, 0) << "the kill did not happen";  // retiring checkpoint-1 at step 2
  EXPECT_FALSE(fs::exists(out + "/checkpoint-1"));
  EXPECT_TRUE(fs::exists(out + "/checkpoint-1.deleting"));
  EXPECT_TRUE(fs::exists(out + "/checkpoint-2/trainer_state.json"));
  r = run_snug(run + " --resume-from " + out, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("resuming " + out + " at step 2"));
  EXPECT_FALSE(fs::exists(out + "/checkpoint-1.deleting"));
  EXPECT_FALSE(fs::exists(out + "/checkpoint-2"));
  EXPECT_TRUE(fs::exists(out + "/checkpoint-3/trainer_state.json"));
}

std::string host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

// Two runs into one folder: the loser ended with "internal error ... filesystem error". The lock
// refuses the second job before step 1 (exit 2), naming the holder.
TEST(OutputDirSafetyCli, SecondJobIsRefusedNamingTheHolder) {
  TempDir tmp;
  const std::string out = tmp.path("out");
  ::unsetenv("SNUG_JOB_ID");
  const OutputDirLock held(out);  // this test process is the other run
  const CliResult r = run_snug(kRun + " --max-steps 1 --save-steps 1 --output-dir " + out, 120);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  const std::string pid = std::to_string(::getpid());
  EXPECT_THAT(r.err, HasSubstr("snug: error: --output-dir " + out +
                               ": another run is writing here: job pid " + pid + " on " + host() +
                               " (pid " + pid + " on " + host() + ", since "));
  EXPECT_FALSE(fs::exists(out + "/checkpoint-1"));
}

// The ranks of one job share the folder: the same SNUG_JOB_ID takes the lock shared.
TEST(OutputDirSafetyCli, RanksOfOneJobShareTheLock) {
  TempDir tmp;
  const std::string out = tmp.path("out");
  ::setenv("SNUG_JOB_ID", "job-29", 1);
  {
    const OutputDirLock held(out);  // rank 0 of job-29
    const CliResult r = run_snug_env(
        "SNUG_JOB_ID=job-29 ", kRun + " --max-steps 1 --save-steps 1 --output-dir " + out, 120);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const CliResult other = run_snug_env(
        "SNUG_JOB_ID=job-30 ", kRun + " --max-steps 1 --save-steps 1 --output-dir " + out, 120);
    EXPECT_EQ(other.exit_code, 2) << other.err;
    EXPECT_THAT(other.err, HasSubstr("another run is writing here: job job-29 (pid "));
  }
  ::unsetenv("SNUG_JOB_ID");
}

}  // namespace output_dir_safety_cli_test
}  // namespace
}  // namespace snug::test

// The snug executable's OpenMP wait policy (cli/omp_wait_policy.h): spinning is kept where
// every thread has a CPU of its own, PASSIVE is set (and the program re-executed, since libgomp
// has read its environment before main) where spinning would take CPU time from another task,
// and a user's own setting always wins. What it is for is measured in docs/benchmarks.md.
#include "cli/omp_wait_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "support/run_cli.h"

namespace snug {
namespace {
namespace omp_wait_policy_test {

using test::run_snug_env;
using ::testing::HasSubstr;

TEST(OmpWaitPolicy, SpinsOnlyWhereEveryThreadHasACpu) {
  EXPECT_FALSE(cli::spinning_would_steal(0, 2, 2));   // idle 2-core host, 2 threads
  EXPECT_TRUE(cli::spinning_would_steal(1, 2, 2));    // one busy process beside them
  EXPECT_FALSE(cli::spinning_would_steal(1, 1, 2));   // one thread: a core each
  EXPECT_FALSE(cli::spinning_would_steal(6, 2, 64));  // a big host with room to spare
  EXPECT_TRUE(cli::spinning_would_steal(0, 3, 2));    // more threads than CPUs
  EXPECT_FALSE(cli::spinning_would_steal(-1, 3, 2));  // unknown load: the runtime's default
}

TEST(OmpWaitPolicy, CountsOtherRunnableTasks) {
  const int n = cli::other_runnable_tasks();  // Linux always has /proc/stat
  EXPECT_GE(n, 0);
}

// More threads than CPUs always oversubscribe, so the executable must set PASSIVE itself (the
// test preset's own OMP_WAIT_POLICY is removed first); the report and `snug info` say so.
TEST(OmpWaitPolicy, OversubscribedRunSleepsAndSaysSo) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  const std::string env =
      "env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_NUM_THREADS=" + std::to_string(cpus + 1) + " ";
  const test::CliResult info = run_snug_env(env, "info", 60);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_THAT(info.out, HasSubstr("OpenMP wait  PASSIVE"));
  test::TempDir tmp;
  const std::string report = tmp.path("r.json");
  const test::CliResult r = run_snug_env(env, "train --max-steps 1 --report-json " + report, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::read_json(report)["system"]["omp_wait_policy"], "PASSIVE");
}

TEST(OmpWaitPolicy, TheUsersSettingWins) {
  const std::string env = "env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=active OMP_NUM_THREADS=64 ";
  const test::CliResult info = run_snug_env(env, "info", 60);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_THAT(info.out, HasSubstr("OpenMP wait  active"));
  const test::CliResult spin =
      run_snug_env("env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=1000 OMP_NUM_THREADS=64 ", "info", 60);
  ASSERT_EQ(spin.exit_code, 0) << spin.err;
  EXPECT_THAT(spin.out, HasSubstr("OpenMP wait  runtime default"));
  EXPECT_THAT(spin.out, HasSubstr("GOMP_SPINCOUNT=1000"));
}

}  // namespace omp_wait_policy_test
}  // namespace
}  // namespace snug

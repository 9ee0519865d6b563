// Runs the built `snug` binary (SNUG_BINARY) as a user would, capturing exit status and output.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace snug::test {

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// `args` is appended to the binary path as shell words (quote them yourself). A positive
// `timeout_s` runs it under timeout(1), so that a regression that hangs fails (exit 124) instead
// of stalling the suite.
CliResult run_snug(const std::string& args, int timeout_s = 0);
// The same with environment assignments before the binary, e.g. "ONEDNN_MAX_CPU_ISA=AVX2 ".
CliResult run_snug_env(const std::string& env, const std::string& args, int timeout_s = 0);
// A fresh, empty directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path(const std::string& name) const;

 private:
  std::string dir_;
};

// Writes `bytes` to `path` (a file a test hands to the command).
void write_file(const std::string& path, const std::string& bytes);
// The bytes of `path` ("" when it cannot be read).
std::string slurp(const std::string& path);

// The JSON document in `path` (a report, plan, timeline or quantize output).
nlohmann::json read_json(const std::string& path);

// `snug plan FLAGS --json` and `snug train FLAGS --max-steps 2 --report-json`, each writing into
// tmp (file names tagged with `tag`); the JSON documents are read when the command exited 0.
struct PlanAndTrain {
  CliResult plan, train;
  nlohmann::json plan_json, train_json;
};
PlanAndTrain plan_and_train(const TempDir& tmp, const std::string& flags, const std::string& tag);
// `snug train FLAGS --report-json REPORT` (under a 300 s timeout) exited 0; *report_json is the
// report it wrote. For ASSERT_TRUE.
::testing::AssertionResult train_report(const std::string& flags, const std::string& report,
                                        nlohmann::json* report_json);

// `snug train FLAGS --max-steps 6 --save-steps 3` into tmp's "out", and `snug train RESUME_FLAGS
// --resume-from out/checkpoint-3 --max-steps 6` into tmp's "out2": both exit 0, and the resumed
// run's losses of steps 4 to 6 equal the uninterrupted run's bit for bit (reports in tmp's
// straight.json and resumed.json); for ASSERT_TRUE.
::testing::AssertionResult resumes_bit_for_bit(const TempDir& tmp, const std::string& flags,
                                               const std::string& resume_flags);

// The report's "loss" has `steps` entries, and the mean of its last five is at least `by` below
// the mean of its first five (a failure gives both means); for EXPECT_TRUE.
::testing::AssertionResult loss_falls(const nlohmann::json& report, size_t steps, double by);

// Both commands exited 0 and the plan's peak_bytes and max_by_category equal the run's measured
// ones (a failure names what differs); for ASSERT_TRUE.
::testing::AssertionResult plan_equals_run(const PlanAndTrain& pt);

}  // namespace snug::test

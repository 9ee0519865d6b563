// Runs the built `snug` binary (SNUG_BINARY) as a user would, capturing exit status and output.
#pragma once

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

// The JSON document in `path` (a report, plan, timeline or quantize output).
nlohmann::json read_json(const std::string& path);

// `snug plan FLAGS --json` and `snug train FLAGS --max-steps 2 --report-json`, each writing into
// tmp (file names tagged with `tag`); the JSON documents are read when the command exited 0.
struct PlanAndTrain {
  CliResult plan, train;
  nlohmann::json plan_json, train_json;
};
PlanAndTrain plan_and_train(const TempDir& tmp, const std::string& flags, const std::string& tag);

}  // namespace snug::test

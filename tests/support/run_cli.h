// Runs the built `snug` binary (SNUG_BINARY) as a user would, capturing exit status and output.
#pragma once

#include <string>

namespace snug::test {

struct CliResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// `args` is appended to the binary path as shell words (quote them yourself).
CliResult run_snug(const std::string& args);
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

}  // namespace snug::test

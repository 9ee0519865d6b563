#include "support/run_cli.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace snug::test {

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}
}  // namespace

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  dir_ = (std::filesystem::temp_directory_path() /
          ("snug-test-" + std::to_string(getpid()) + "-" + std::to_string(counter++)))
             .string();
  std::filesystem::create_directories(dir_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string TempDir::path(const std::string& name) const {
  return (std::filesystem::path(dir_) / name).string();
}

CliResult run_snug(const std::string& args, int timeout_s) {
  return run_snug_env("", args, timeout_s);
}

CliResult run_snug_env(const std::string& env, const std::string& args, int timeout_s) {
  TempDir tmp;
  std::string cmd = env;
  if (timeout_s > 0) cmd += "timeout -k 5 " + std::to_string(timeout_s) + " ";
  cmd += SNUG_BINARY;
  cmd += ' ';
  cmd += args;
  cmd += " >";
  cmd += tmp.path("out");
  cmd += " 2>";
  cmd += tmp.path("err");
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(tmp.path("out"));
  r.err = slurp(tmp.path("err"));
  return r;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

PlanAndTrain plan_and_train(const TempDir& tmp, const std::string& flags, const std::string& tag) {
  const std::string plan = tmp.path("plan-" + tag + ".json");
  const std::string train = tmp.path("train-" + tag + ".json");
  PlanAndTrain r;
  r.plan = run_snug("plan " + flags + " --json " + plan);
  r.train = run_snug("train " + flags + " --max-steps 2 --report-json " + train);
  if (r.plan.exit_code == 0) r.plan_json = read_json(plan);
  if (r.train.exit_code == 0) r.train_json = read_json(train);
  return r;
}

}  // namespace snug::test

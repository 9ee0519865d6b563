#include "support/run_cli.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace snug::test {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

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

namespace {

// The snug this build made (SNUG_BINARY); in a build tree copied elsewhere (the GPU machine gets
// a copy of the check build), the one beside the test binary's folder (build/X/tests/.. ).
std::string snug_binary() {
  if (std::filesystem::exists(SNUG_BINARY)) return SNUG_BINARY;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return SNUG_BINARY;
  const std::filesystem::path beside = self.parent_path().parent_path() / "snug";
  return std::filesystem::exists(beside) ? beside.string() : std::string(SNUG_BINARY);
}

}  // namespace

CliResult run_snug(const std::string& args, int timeout_s) {
  return run_snug_env("", args, timeout_s);
}

CliResult run_snug_env(const std::string& env, const std::string& args, int timeout_s) {
  TempDir tmp;
  std::string cmd = env;
  if (timeout_s > 0) cmd += "timeout -k 5 " + std::to_string(timeout_s) + " ";
  cmd += snug_binary();
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

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
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

::testing::AssertionResult train_report(const std::string& flags, const std::string& report,
                                        nlohmann::json* report_json) {
  const CliResult r = run_snug("train " + flags + " --report-json " + report, 300);
  if (r.exit_code != 0)
    return ::testing::AssertionFailure() << "train exited " << r.exit_code << ": " << r.err;
  *report_json = read_json(report);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult resumes_bit_for_bit(const TempDir& tmp, const std::string& flags,
                                               const std::string& resume_flags) {
  const std::string out = tmp.path("out");
  CliResult r = run_snug("train" + flags + " --max-steps 6 --save-steps 3 --output-dir " + out +
                         " --report-json " + tmp.path("straight.json"));
  if (r.exit_code != 0) return ::testing::AssertionFailure() << "train: " << r.err;
  r = run_snug("train" + resume_flags + " --resume-from " + out + "/checkpoint-3 --max-steps 6" +
               " --output-dir " + tmp.path("out2") + " --report-json " + tmp.path("resumed.json"));
  if (r.exit_code != 0) return ::testing::AssertionFailure() << "resumed train: " << r.err;
  const nlohmann::json straight = read_json(tmp.path("straight.json"))["loss"];
  const nlohmann::json resumed = read_json(tmp.path("resumed.json"))["loss"];
  if (straight.size() != 6 || resumed.size() != 3)
    return ::testing::AssertionFailure()
           << straight.size() << " and " << resumed.size() << " losses, expected 6 and 3";
  for (size_t i = 0; i < 3; ++i) {
    const double a = straight[3 + i], b = resumed[i];
    if (std::memcmp(&a, &b, sizeof a) != 0)
      return ::testing::AssertionFailure()
             << "step " << 4 + i << ": straight " << a << ", resumed " << b;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult loss_falls(const nlohmann::json& report, size_t steps, double by) {
  const nlohmann::json& loss = report["loss"];
  if (loss.size() != steps)
    return ::testing::AssertionFailure() << loss.size() << " losses, expected " << steps;
  if (steps < 5) return ::testing::AssertionFailure() << "fewer than 5 losses";
  auto mean = [&](size_t from) {
    double s = 0;
    for (size_t i = from; i < from + 5; ++i) s += loss[i].get<double>();
    return s / 5.0;
  };
  const double first = mean(0), last = mean(steps - 5);
  if (last < first - by) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "first " << first << " last " << last;
}

::testing::AssertionResult plan_equals_run(const PlanAndTrain& pt) {
  if (pt.plan.exit_code != 0)
    return ::testing::AssertionFailure()
           << "plan exited " << pt.plan.exit_code << ": " << pt.plan.err;
  if (pt.train.exit_code != 0)
    return ::testing::AssertionFailure()
           << "train exited " << pt.train.exit_code << ": " << pt.train.err;
  for (const char* key : {"peak_bytes", "max_by_category"})
    if (pt.plan_json["memory"][key] != pt.train_json["memory"][key])
      return ::testing::AssertionFailure()
             << "memory." << key << ": plan " << pt.plan_json["memory"][key].dump() << ", run "
             << pt.train_json["memory"][key].dump();
  return ::testing::AssertionSuccess();
}

}  // namespace snug::test

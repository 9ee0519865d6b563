// A unique temporary directory for one test, removed with everything in it on destruction.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>

namespace snug::testing_data {

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    std::string name = "snug_data_test_";
    name += std::to_string(::getpid());
    name += '_';
    name += std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    name += '_';
    name += std::to_string(counter++);
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace snug::testing_data

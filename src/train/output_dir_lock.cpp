#include "train/output_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/error.h"
#include "train/number_range.h"

namespace snug {

namespace fs = std::filesystem;

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

std::string read_all(int fd) {
  std::string text;
  char buf[4096];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || text.size() > (1 << 16)) break;
    text.append(buf, static_cast<size_t>(n));
    at += n;
  }
  return text;
}

// The record of the process that holds the lock, as the file has it (null while unwritten).
nlohmann::json holder(int fd) {
  const std::string text = read_all(fd);
  return nlohmann::json::parse(text, nullptr, false);
}

std::string describe(const nlohmann::json& h) {
  if (!h.is_object()) return "a run that has not recorded itself yet";
  auto s = [&](const char* k) {
    if (!h.contains(k)) return std::string("?");
    return value_excerpt(h[k].is_string() ? h[k].get<std::string>() : h[k].dump());
  };
  return detail::concat("job ", s("job"), " (pid ", s("pid"), " on ", s("host"), ", since ",
                        s("started"), ")");
}

}  // namespace

std::string OutputDirLock::job() {
  const char* id = std::getenv("SNUG_JOB_ID");
  if (id != nullptr && *id != '\0') return id;
  return detail::concat("pid ", ::getpid(), " on ", host_name());
}

OutputDirLock::OutputDirLock(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  SNUG_CHECK(!ec, dir, ": cannot create the output directory: ", ec.message());
  const std::string path = (fs::path(dir) / kOutputDirLockFile).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  SNUG_CHECK(fd_ >= 0, path, ": cannot open the output dir's lock: ", std::strerror(errno));
  const std::string me = job();
  // A record being written by the first process of a job reads as nothing for a moment; the
  // others of its job wait for it (a bounded wait: 200 x 10 ms).
  for (int attempt = 0;; ++attempt) {
    if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
      const std::time_t now = std::time(nullptr);
      char started[32];
      std::strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
      const std::string record =
          nlohmann::json{
              {"job", me}, {"pid", ::getpid()}, {"host", host_name()}, {"started", started}}
              .dump() +
          "\n";
      const bool written =
          ::ftruncate(fd_, 0) == 0 &&
          ::pwrite(fd_, record.data(), record.size(), 0) == static_cast<ssize_t>(record.size());
      SNUG_CHECK(written, path, ": cannot write the output dir's lock: ", std::strerror(errno));
      SNUG_CHECK(::flock(fd_, LOCK_SH) == 0, path,
                 ": cannot share the lock: ", std::strerror(errno));
      return;
    }
    const nlohmann::json h = holder(fd_);
    if (h.is_object() && h.value("job", "") == me && ::flock(fd_, LOCK_SH | LOCK_NB) == 0) return;
    if (!h.is_object() && attempt < 200) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    ::close(fd_);
    fd_ = -1;
    throw OutputDirInUseError(detail::concat(
        "--output-dir ", dir, ": another run is writing here: ", describe(h), ", holding ", path,
        ". Wait for it to end or choose another --output-dir (the ranks of one job share the "
        "folder when they set the same SNUG_JOB_ID)"));
  }
}

OutputDirLock::~OutputDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace snug

#include "io/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace snug {

namespace fs = std::filesystem;

namespace {

// `path` with every symbolic link along the final component followed (not the directories: a
// rename onto "dir-link/name" lands in the linked directory anyway).
std::string resolve_links(const std::string& path, const std::string& what) {
  fs::path p(path);
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p.string();
    std::error_code ec;
    const fs::path next = fs::read_symlink(p, ec);
    SNUG_CHECK(!ec, what, ": cannot read the symbolic link '", p.string(), "': ", ec.message());
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  throw Error(detail::concat(what, ": too many levels of symbolic links at '", path, "'"));
}

void fsync_parent(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  const std::string dir = parent.empty() ? "." : parent.string();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);  // best effort: some filesystems refuse fsync on a directory
    ::close(dfd);
  }
}

}  // namespace

OutputFile::OutputFile(const std::string& path, const std::string& what) : what_(what) {
  SNUG_CHECK(!path.empty(), what, ": empty path");
  target_ = resolve_links(path, what);
  struct stat st {};
  const bool exists = ::stat(target_.c_str(), &st) == 0;
  SNUG_CHECK(!exists || !S_ISDIR(st.st_mode), what, ": '", target_, "' is a directory");
  if (exists && !S_ISREG(st.st_mode)) {
    direct_ = true;
    // O_NONBLOCK: a FIFO with no reader fails (ENXIO) instead of blocking; cleared after.
    fd_ = ::open(target_.c_str(), O_WRONLY | O_CLOEXEC | O_NONBLOCK);
    SNUG_CHECK(fd_ >= 0, what, ": cannot open '", target_, "': ", std::strerror(errno));
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags >= 0) (void)::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK);
    return;
  }
  tmp_ = target_ + ".tmp." + std::to_string(::getpid());
  const mode_t mode = exists ? (st.st_mode & 07777) : 0644;
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  SNUG_CHECK(fd_ >= 0, what, ": cannot create '", tmp_, "': ", std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !direct_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void OutputFile::write(const void* data, size_t bytes) {
  SNUG_ASSERT(fd_ >= 0 && !committed_, "write after commit");
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    SNUG_CHECK(n > 0, what_, ": writing '", writing_to(), "' failed: ", std::strerror(errno));
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void OutputFile::commit() {
  SNUG_ASSERT(fd_ >= 0 && !committed_, "commit twice");
  if (!direct_)
    SNUG_CHECK(::fsync(fd_) == 0, what_, ": fsync of '", tmp_, "' failed: ", std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  SNUG_CHECK(::close(fd) == 0, what_, ": closing '", writing_to(),
             "' failed: ", std::strerror(errno));
  if (direct_) {
    committed_ = true;
    return;
  }
  SNUG_CHECK(::rename(tmp_.c_str(), target_.c_str()) == 0, what_, ": cannot rename '", tmp_,
             "' onto '", target_, "': ", std::strerror(errno));
  committed_ = true;
  fsync_parent(target_);
}

void write_output_file(const std::string& path, std::string_view content, const std::string& what) {
  OutputFile f(path, what);
  f.write(content);
  f.commit();
}

}  // namespace snug

#include "io/disk_space.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "io/excerpt.h"

namespace snug {

namespace {

std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

}  // namespace

int64_t free_disk_bytes(const std::string& dir) {
  if (const char* v = std::getenv("SNUG_FREE_DISK_BYTES")) {
    char* end = nullptr;
    errno = 0;
    const long long n = std::strtoll(v, &end, 10);
    SNUG_CHECK(*v != '\0' && end != nullptr && *end == '\0' && errno == 0 && n >= 0,
               "SNUG_FREE_DISK_BYTES: '", excerpt(v), "' is not a non-negative number of bytes");
    return static_cast<int64_t>(n);
  }
  struct statvfs st {};
  SNUG_CHECK(::statvfs(dir.c_str(), &st) == 0, dir,
             ": cannot query the free disk space: ", std::strerror(errno));
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

void check_disk_space(const std::string& dir, int64_t needed, const std::string& what) {
  const int64_t free = free_disk_bytes(dir);
  SNUG_CHECK(needed <= free, what, ": not saved: it needs ", needed, " bytes (", gib(needed),
             ") on ", dir, ", which has ", free, " bytes (", gib(free),
             ") free; free some space or choose another --output-dir");
}

}  // namespace snug

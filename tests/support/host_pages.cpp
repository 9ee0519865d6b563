#include "support/host_pages.h"

#include <sys/mman.h>

#include <cstring>

#include "core/error.h"
#include "kernels/backends.h"

namespace snug::test {

HostPages::HostPages(int64_t range_pages, int64_t limit_pages, int64_t page_bytes)
    : range_pages_(range_pages), limit_(limit_pages), page_(page_bytes) {
  for (char*& b : base_) {
    void* p = mmap(nullptr, static_cast<size_t>(range_pages_ * page_), PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    SNUG_CHECK(p != MAP_FAILED, "HostPages: mmap of ", range_pages_, " pages failed");
    b = static_cast<char*>(p);
  }
}

HostPages::~HostPages() {
  for (char* b : base_) munmap(b, static_cast<size_t>(range_pages_ * page_));
}

bool HostPages::grow(int64_t n) {
  if (physical_ + n > limit_) return false;
  physical_ += n;
  spare_ += n;
  return true;
}

void HostPages::map(int r, int64_t first, int64_t n) {
  SNUG_CHECK(n <= spare_, "HostPages: mapping ", n, " pages with ", spare_, " spare");
  SNUG_CHECK(mprotect(base_[r] + first * page_, static_cast<size_t>(n * page_),
                      PROT_READ | PROT_WRITE) == 0,
             "HostPages: mprotect");
  spare_ -= n;
}

void HostPages::unmap(const std::vector<Run>& runs) {
  for (const Run& run : runs) {
    char* p = base_[run.range] + run.first * page_;
    const size_t bytes = static_cast<size_t>(run.count * page_);
    SNUG_CHECK(madvise(p, bytes, MADV_DONTNEED) == 0 && mprotect(p, bytes, PROT_NONE) == 0,
               "HostPages: taking pages back");
    spare_ += run.count;
  }
  ++unmap_calls_;
  last_ = runs;
}

void* PagedCpuBackend::allocate(int64_t) const {
  throw Error("PagedCpuBackend::allocate: a paged device's pool places its blocks itself");
}
void PagedCpuBackend::zero(void* dst, int64_t bytes) const {
  cpu_backend().zero(dst, bytes);
}
void PagedCpuBackend::upload(void* dst, const void* src, int64_t bytes) const {
  cpu_backend().upload(dst, src, bytes);
}
void PagedCpuBackend::download(void* dst, const void* src, int64_t bytes) const {
  cpu_backend().download(dst, src, bytes);
}
void PagedCpuBackend::copy(void* dst, const void* src, int64_t bytes) const {
  cpu_backend().copy(dst, src, bytes);
}
const OpTable& PagedCpuBackend::ops() const {
  return cpu_backend().ops();
}

}  // namespace snug::test

// A host stand-in for the GPU's page backing (kernels/cuda/pages.cu), for tests of the paged
// arena (core/page_arena.h) on machines without a GPU: each range is an address reservation
// (mmap, no access), a mapped page is made readable and writable, and a page taken back loses
// its contents and its access again, so a kernel that touched a page the arena gave back would
// fault. `limit_pages` caps the physical pages (grow refuses past it), as a full GPU does.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/backend.h"
#include "core/page_backing.h"

namespace snug::test {

class HostPages final : public PageBacking {
 public:
  explicit HostPages(int64_t range_pages, int64_t limit_pages = INT64_MAX,
                     int64_t page_bytes = kDevicePageBytes);
  ~HostPages() override;
  HostPages(const HostPages&) = delete;
  HostPages& operator=(const HostPages&) = delete;

  int64_t page_bytes() const override { return page_; }
  char* base(int r) const override { return base_[r]; }
  int64_t range_pages() const override { return range_pages_; }
  bool grow(int64_t n) override;
  void map(int r, int64_t first, int64_t n) override;
  void unmap(const std::vector<Run>& runs) override;

  int64_t physical() const { return physical_; }
  int64_t spare() const { return spare_; }
  int64_t unmap_calls() const { return unmap_calls_; }
  const std::vector<Run>& last_unmapped() const { return last_; }

 private:
  int64_t range_pages_, limit_, page_;
  char* base_[kPageArenaRanges] = {};
  int64_t physical_ = 0, spare_ = 0, unmap_calls_ = 0;
  std::vector<Run> last_;
};

// The cpu backend (fast kernels, host copies) over HostPages: a Device made on it places every
// tensor in a paged arena over HostPages of its own (range_pages, limit_pages, page_bytes).
class PagedCpuBackend final : public Backend {
 public:
  explicit PagedCpuBackend(int64_t range_pages, int64_t limit_pages = INT64_MAX,
                           int64_t page_bytes = kDevicePageBytes)
      : range_pages_(range_pages), limit_(limit_pages), page_(page_bytes) {}
  const char* name() const override { return "cpu-paged"; }
  bool backed() const override { return true; }
  bool host_addressable() const override { return true; }
  void* allocate(int64_t) const override;  // never called: the pool places blocks in pages
  void release(void*, int64_t) const override {}
  void zero(void* dst, int64_t bytes) const override;
  void upload(void* dst, const void* src, int64_t bytes) const override;
  void download(void* dst, const void* src, int64_t bytes) const override;
  void copy(void* dst, const void* src, int64_t bytes) const override;
  const OpTable& ops() const override;
  std::unique_ptr<PageBacking> page_backing() const override {
    return std::make_unique<HostPages>(range_pages_, limit_, page_);
  }

 private:
  int64_t range_pages_, limit_, page_;
};

}  // namespace snug::test

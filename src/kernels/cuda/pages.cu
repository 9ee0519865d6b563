// The GPU's page backing for the paged arena (core/page_arena.h): address ranges reserved with
// CUDA's virtual memory management and backed by 2 MiB physical pages, one handle per page so
// that any page can be taken back alone.
//
// The driver's functions come through the runtime (cudaGetDriverEntryPointByVersion), so snug
// links no libcuda and a machine without a driver still loads it.
//
// A take-back does not wait for the GPU. A freed block's last kernels may still be queued, so
// the page's old address stays mapped while its handle is already spare and can be mapped at the
// new place at once (a handle may be mapped at several addresses): kernels queued after the
// placement use it in stream order after those before it, as with any allocator's reuse. An event
// recorded on the compute stream at the take-back says when the old addresses may go; they are
// unmapped at a later call once it has passed, or, waiting for it, when the arena maps a page at
// an old address again. Work on other streams is done with a block before it is freed (NCCL's
// collectives are waited for on the host, dist/nccl/communicator.cpp). Waiting for the whole
// device at each take-back cost the bf16 GPT-2 step 6% on an H200 (13 take-backs a step, each
// followed by ~55 us of driver calls per page while the GPU idled; docs/cuda.md#memory).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/page_backing.h"
#include "kernels/cuda/context.cuh"
#include "kernels/cuda/pages.h"

namespace snug::cuda {

namespace {

struct Driver {
  PFN_cuMemAddressReserve_v10020 reserve = nullptr;
  PFN_cuMemAddressFree_v10020 address_free = nullptr;
  PFN_cuMemCreate_v10020 create = nullptr;
  PFN_cuMemRelease_v10020 release = nullptr;
  PFN_cuMemMap_v10020 map = nullptr;
  PFN_cuMemUnmap_v10020 unmap = nullptr;
  PFN_cuMemSetAccess_v10020 set_access = nullptr;
  PFN_cuMemGetAllocationGranularity_v10020 granularity = nullptr;
};

template <typename F>
void load_one(const char* name, F& f) {
  void* p = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check(cudaGetDriverEntryPointByVersion(name, &p, 12000, cudaEnableDefault, &found), name);
  SNUG_CHECK(found == cudaDriverEntryPointSuccess && p != nullptr, "the CUDA driver has no ", name,
             " (the paged arena needs CUDA's virtual memory management; SNUG_CUDA_ALLOC=async "
             "uses the stream-ordered pool instead)");
  f = reinterpret_cast<F>(p);
}

void check_cu(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return;
  throw Error(std::string("CUDA driver error in ") + what + ": CUresult " + std::to_string(r));
}

const Driver& driver() {
  static const Driver d = [] {
    Driver x;
    load_one("cuMemAddressReserve", x.reserve);
    load_one("cuMemAddressFree", x.address_free);
    load_one("cuMemCreate", x.create);
    load_one("cuMemRelease", x.release);
    load_one("cuMemMap", x.map);
    load_one("cuMemUnmap", x.unmap);
    load_one("cuMemSetAccess", x.set_access);
    load_one("cuMemGetAllocationGranularity", x.granularity);
    return x;
  }();
  return d;
}

class CudaPages final : public PageBacking {
 public:
  CudaPages(int index, int64_t device_bytes) : d_(driver()) {
    prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop_.location.id = index;
    size_t gran = 0;
    check_cu(d_.granularity(&gran, &prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
             "cuMemGetAllocationGranularity");
    SNUG_CHECK(gran > 0 && kDevicePageBytes % static_cast<int64_t>(gran) == 0,
               "the GPU maps memory in ", gran, "-byte pages, which do not divide snug's ",
               kDevicePageBytes, " (SNUG_CUDA_ALLOC=async avoids the paged arena)");
    access_.location = prop_.location;
    access_.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    // Each range can address twice the device: taken-back pages leave holes of addresses.
    pages_ = 2 * ((device_bytes + kDevicePageBytes - 1) / kDevicePageBytes);
    for (int r = 0; r < kPageArenaRanges; ++r) {
      CUdeviceptr base = 0;
      check_cu(d_.reserve(&base, static_cast<size_t>(pages_ * kDevicePageBytes),
                          static_cast<size_t>(kDevicePageBytes), 0, 0),
               "cuMemAddressReserve");
      base_[r] = reinterpret_cast<char*>(static_cast<uintptr_t>(base));
      handle_[r].assign(static_cast<size_t>(pages_), 0);
      old_[r].assign(static_cast<size_t>(pages_), 0);
    }
  }
  // Gives every page and the addresses back once the GPU is done with them. Never throws (a
  // device goes also while an error unwinds); errors here are an earlier kernel's.
  ~CudaPages() override {
    (void)cudaDeviceSynchronize();
    for (Pending& p : pending_) {
      for (const Old& o : p.pages) (void)d_.unmap(address(o.range, o.page), kPage);
      (void)cudaEventDestroy(p.passed);
    }
    for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
    for (int r = 0; r < kPageArenaRanges; ++r) {
      if (!base_[r]) continue;
      for (int64_t p = 0; p < pages_; ++p)
        if (CUmemGenericAllocationHandle h = handle_[r][static_cast<size_t>(p)]) {
          (void)d_.unmap(address(r, p), kPage);
          (void)d_.release(h);
        }
      (void)d_.address_free(address(r, 0), static_cast<size_t>(pages_ * kDevicePageBytes));
    }
    for (CUmemGenericAllocationHandle h : spare_) (void)d_.release(h);
  }
  CudaPages(const CudaPages&) = delete;
  CudaPages& operator=(const CudaPages&) = delete;

  int64_t page_bytes() const override { return kDevicePageBytes; }
  char* base(int r) const override { return base_[r]; }
  int64_t range_pages() const override { return pages_; }

  bool grow(int64_t n) override {
    std::vector<CUmemGenericAllocationHandle> made;
    for (int64_t i = 0; i < n; ++i) {
      CUmemGenericAllocationHandle h = 0;
      const CUresult r = d_.create(&h, static_cast<size_t>(kDevicePageBytes), &prop_, 0);
      if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        for (CUmemGenericAllocationHandle m : made) (void)d_.release(m);
        return false;
      }
      check_cu(r, "cuMemCreate");
      made.push_back(h);
    }
    spare_.insert(spare_.end(), made.begin(), made.end());
    return true;
  }

  void map(int r, int64_t first, int64_t n) override {
    SNUG_ASSERT(static_cast<int64_t>(spare_.size()) >= n);
    unmap_passed(false);
    // An old address still mapped here: wait until the device passed its take-back.
    while (any_old(r, first, n)) unmap_passed(true);
    for (int64_t p = first; p < first + n; ++p) {
      const CUmemGenericAllocationHandle h = spare_.back();
      check_cu(d_.map(address(r, p), kPage, 0, h, 0), "cuMemMap");
      spare_.pop_back();
      handle_[r][static_cast<size_t>(p)] = h;
    }
    check_cu(d_.set_access(address(r, first), static_cast<size_t>(n) * kPage, &access_, 1),
             "cuMemSetAccess");
  }

  void unmap(const std::vector<Run>& runs) override {
    unmap_passed(false);
    Pending p{next_event(), {}};
    check(cudaEventRecord(p.passed, stream()), "recording a take-back of pages");
    for (const Run& run : runs)
      for (int64_t page = run.first; page < run.first + run.count; ++page) {
        CUmemGenericAllocationHandle& h = handle_[run.range][static_cast<size_t>(page)];
        spare_.push_back(h);
        p.pages.push_back({run.range, page});
        old_[run.range][static_cast<size_t>(page)] = 1;
        h = 0;
      }
    pending_.push_back(std::move(p));
  }

  int64_t old_pages() const {
    int64_t n = 0;
    for (const Pending& p : pending_) n += static_cast<int64_t>(p.pages.size());
    return n;
  }

 private:
  static constexpr size_t kPage = static_cast<size_t>(kDevicePageBytes);
  struct Old {  // a taken-back page's address, still mapped
    int range;
    int64_t page;
  };
  struct Pending {  // one take-back: its event and its pages' old addresses
    cudaEvent_t passed;
    std::vector<Old> pages;
  };

  bool any_old(int r, int64_t first, int64_t n) const {
    for (int64_t p = first; p < first + n; ++p)
      if (old_[r][static_cast<size_t>(p)]) return true;
    return false;
  }

  // Unmaps the old addresses of the take-backs the device has passed, oldest first; `wait`:
  // waits for the oldest one first (at least one is unmapped if any is pending).
  void unmap_passed(bool wait) {
    while (!pending_.empty()) {
      Pending& p = pending_.front();
      const cudaError_t e = wait ? cudaEventSynchronize(p.passed) : cudaEventQuery(p.passed);
      if (e == cudaErrorNotReady) return;
      check(e, "waiting for the GPU to pass a take-back of pages");
      for (const Old& o : p.pages) {
        check_cu(d_.unmap(address(o.range, o.page), kPage), "cuMemUnmap");
        old_[o.range][static_cast<size_t>(o.page)] = 0;
      }
      events_.push_back(p.passed);
      pending_.pop_front();
      wait = false;
    }
  }

  cudaEvent_t next_event() {
    if (events_.empty()) {
      cudaEvent_t e = nullptr;
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate (pages)");
      return e;
    }
    const cudaEvent_t e = events_.back();
    events_.pop_back();
    return e;
  }

  CUdeviceptr address(int r, int64_t page) const {
    return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(base_[r])) +
           static_cast<CUdeviceptr>(page * kDevicePageBytes);
  }

  const Driver& d_;
  CUmemAllocationProp prop_{};
  CUmemAccessDesc access_{};
  int64_t pages_ = 0;
  char* base_[kPageArenaRanges] = {};
  std::vector<CUmemGenericAllocationHandle> handle_[kPageArenaRanges];  // per page; 0: unmapped
  std::vector<uint8_t> old_[kPageArenaRanges];  // per page; 1: an old mapping not yet unmapped
  std::vector<CUmemGenericAllocationHandle> spare_;
  std::deque<Pending> pending_;
  std::vector<cudaEvent_t> events_;  // recorded and passed, for the next take-back
};

}  // namespace

std::unique_ptr<PageBacking> make_page_backing(int index, int64_t device_bytes) {
  return std::make_unique<CudaPages>(index, device_bytes);
}

int64_t old_pages(const PageBacking& b) {
  const auto* c = dynamic_cast<const CudaPages*>(&b);
  return c ? c->old_pages() : 0;
}

}  // namespace snug::cuda

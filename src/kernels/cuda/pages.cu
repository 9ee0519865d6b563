// The GPU's page backing for the paged arena (core/page_arena.h): address ranges reserved with
// CUDA's virtual memory management and backed by 2 MiB physical pages, one handle per page so
// that any page can be taken back alone.
//
// The driver's functions come through the runtime (cudaGetDriverEntryPointByVersion), so snug
// links no libcuda and a machine without a driver still loads it. Take-backs wait for the whole
// device (every stream: the compute stream and NCCL's) before unmapping, since a freed block's
// last kernels may still be queued; mapping needs no wait (a block placed on a page is used by
// kernels queued after the placement, on the same stream order as any allocator's reuse).
#include <cuda.h>
#include <cudaTypedefs.h>

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
    }
  }
  // Gives every page and the addresses back once the GPU is done with them. Never throws (a
  // device goes also while an error unwinds); errors here are an earlier kernel's.
  ~CudaPages() override {
    (void)cudaDeviceSynchronize();
    for (int r = 0; r < kPageArenaRanges; ++r) {
      if (!base_[r]) continue;
      for (int64_t p = 0; p < pages_; ++p)
        if (CUmemGenericAllocationHandle h = handle_[r][static_cast<size_t>(p)]) {
          (void)d_.unmap(address(r, p), static_cast<size_t>(kDevicePageBytes));
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
    for (int64_t p = first; p < first + n; ++p) {
      const CUmemGenericAllocationHandle h = spare_.back();
      check_cu(d_.map(address(r, p), static_cast<size_t>(kDevicePageBytes), 0, h, 0), "cuMemMap");
      spare_.pop_back();
      handle_[r][static_cast<size_t>(p)] = h;
    }
    check_cu(
        d_.set_access(address(r, first), static_cast<size_t>(n * kDevicePageBytes), &access_, 1),
        "cuMemSetAccess");
  }

  void unmap(const std::vector<Run>& runs) override {
    check(cudaDeviceSynchronize(), "waiting for the GPU before taking pages back");
    for (const Run& run : runs)
      for (int64_t p = run.first; p < run.first + run.count; ++p) {
        check_cu(d_.unmap(address(run.range, p), static_cast<size_t>(kDevicePageBytes)),
                 "cuMemUnmap");
        spare_.push_back(handle_[run.range][static_cast<size_t>(p)]);
        handle_[run.range][static_cast<size_t>(p)] = 0;
      }
  }

 private:
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
  std::vector<CUmemGenericAllocationHandle> spare_;
};

}  // namespace

std::unique_ptr<PageBacking> make_page_backing(int index, int64_t device_bytes) {
  return std::make_unique<CudaPages>(index, device_bytes);
}

}  // namespace snug::cuda

// The GPU's paged arena (kernels/cuda/pages.cu under core/page_arena.h): a cuda device's tensors
// live in pages it maps itself, keep their values while idle pages are taken back and mapped
// again elsewhere, and hold exactly the pages the books count (the same sequence as
// PageArena.BacksTakesBackAndMakesPagesExactly, at the GPU's 2 MiB pages); two devices at once
// have addresses of their own.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "core/device.h"
#include "core/page_backing.h"
#include "core/tensor.h"
#include "kernels/backends.h"
#include "kernels/cuda/pages.h"
#include "support/gpu.h"

namespace snug {
namespace {

constexpr int64_t kPageFloats = kDevicePageBytes / 4;

std::vector<float> pattern(int64_t pages, float base) {
  std::vector<float> v(static_cast<size_t>(pages * kPageFloats));
  for (size_t i = 0; i < v.size(); ++i) v[i] = base + static_cast<float>(i % 9973);
  return v;
}

Tensor filled(Device& dev, int64_t pages, float base) {
  Tensor t = Tensor::empty({pages * kPageFloats}, DType::f32, Category::activations, dev);
  const std::vector<float> v = pattern(pages, base);
  dev.upload(t.data<float>(), v.data(), t.numel());
  return t;
}

std::vector<float> read(const Device& dev, const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  dev.download(v.data(), t.data<float>(), t.numel());
  return v;
}

TEST(CudaPages, TensorsKeepTheirValuesWhilePagesAreTakenBack) {
  SNUG_REQUIRE_GPU(gpu);
  if (cuda_alloc_mode() != "pages") GTEST_SKIP() << "SNUG_CUDA_ALLOC=" << cuda_alloc_mode();
  Device dev(gpu);
  ASSERT_TRUE(dev.pool().paged());
  Tensor x1 = filled(dev, 8, 1.0f);
  const Tensor x2 = filled(dev, 8, 2.0f);
  x1 = Tensor();                            // pages 0-7 idle
  const Tensor x3 = filled(dev, 12, 3.0f);  // takes them back, makes 4
  MemoryStats s = dev.pool().stats();
  ASSERT_TRUE(s.pages.has_value());
  EXPECT_EQ(s.pages->physical_pages, 20);
  EXPECT_EQ(s.pages->waits, 1);
  EXPECT_EQ(s.pages->unmaps, 8);
  const Tensor x4 = filled(dev, 8, 4.0f);  // the hole at pages 0-7, backed again
  s = dev.pool().stats();
  EXPECT_EQ(s.pages->physical_pages, 28);
  EXPECT_EQ(s.pages->reserved_bytes(), 28 * kDevicePageBytes);
  EXPECT_EQ(read(dev, x2), pattern(8, 2.0f));
  EXPECT_EQ(read(dev, x3), pattern(12, 3.0f));
  EXPECT_EQ(read(dev, x4), pattern(8, 4.0f));
  // The backend zeroing a tensor on paged memory.
  Tensor z = filled(dev, 1, 5.0f);
  z.zero_();
  EXPECT_EQ(read(dev, z), std::vector<float>(static_cast<size_t>(kPageFloats), 0.0f));
}

TEST(CudaPages, TwoDevicesHaveAddressesOfTheirOwn) {
  SNUG_REQUIRE_GPU(gpu);
  if (cuda_alloc_mode() != "pages") GTEST_SKIP() << "SNUG_CUDA_ALLOC=" << cuda_alloc_mode();
  Device a(gpu), b(gpu);
  const Tensor ta = filled(a, 2, 10.0f);
  const Tensor tb = filled(b, 2, 20.0f);
  EXPECT_NE(ta.data<float>(), tb.data<float>());
  EXPECT_EQ(read(a, ta), pattern(2, 10.0f));
  EXPECT_EQ(read(b, tb), pattern(2, 20.0f));
}

// What the arena's take-backs cost on this GPU (docs/cuda.md#memory): making pages, mapping them
// in runs of 16 (one cuMemSetAccess a run), and taking them back (one wait, one cuMemUnmap a
// page), per page, best of 5 rounds of 256 pages. Disabled: a timing, run by check.sh ops.
TEST(CudaPages, DISABLED_TimeMapAndTakeBack) {
  SNUG_REQUIRE_GPU(gpu);
  using Clock = std::chrono::steady_clock;
  const auto us_since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  };
  const CudaDeviceInfo info = cuda_device_info(0);
  const std::unique_ptr<PageBacking> pages = cuda::make_page_backing(0, info.total_bytes);
  constexpr int64_t kPages = 256, kRun = 16;
  auto t0 = Clock::now();
  ASSERT_TRUE(pages->grow(kPages));
  const double create_us = us_since(t0) / kPages;
  double map_us = 1e30, unmap_us = 1e30;
  for (int round = 0; round < 5; ++round) {
    t0 = Clock::now();
    for (int64_t first = 0; first < kPages; first += kRun) pages->map(1, first, kRun);
    map_us = std::min(map_us, us_since(t0) / kPages);
    std::vector<PageBacking::Run> runs;
    for (int64_t first = 0; first < kPages; first += kRun) runs.push_back({1, first, kRun});
    t0 = Clock::now();
    pages->unmap(runs);
    unmap_us = std::min(unmap_us, us_since(t0) / kPages);
  }
  std::printf(
      "CudaPages timing on %s: make %.2f us/page, map %.2f us/page (runs of %lld), take "
      "back %.2f us/page (one wait for %lld pages)\n",
      info.name.c_str(), create_us, map_us, static_cast<long long>(kRun), unmap_us,
      static_cast<long long>(kPages));
}

}  // namespace
}  // namespace snug

// The GPU's paged arena (kernels/cuda/pages.cu under core/page_arena.h): a cuda device's tensors
// live in pages it maps itself, keep their values while idle pages are taken back and mapped
// again elsewhere, and hold exactly the pages the books count (the same sequence as
// PageArena.BacksTakesBackAndMakesPagesExactly, at the GPU's 2 MiB pages); two devices at once
// have addresses of their own.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/device.h"
#include "core/page_backing.h"
#include "core/tensor.h"
#include "kernels/backends.h"
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

}  // namespace
}  // namespace snug

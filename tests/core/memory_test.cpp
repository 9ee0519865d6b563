#include "core/memory.h"

#include <gtest/gtest.h>

#include "core/device.h"
#include "core/tensor.h"
#include "kernels/backends.h"

namespace snug {
namespace {
namespace memory_test {

TEST(MemoryPool, TracksLivePeakAndBreakdownAtPeak) {
  Device dev(cpu_backend());
  {
    Tensor w = Tensor::empty({10, 10}, DType::f32, Category::weights, dev);  // 400 B
    Tensor a = Tensor::empty({50}, DType::f32, Category::activations, dev);  // 200 B
    EXPECT_EQ(dev.pool().live_total(), 600);
    a.reset();
    Tensor g = Tensor::empty({25}, DType::f32, Category::gradients, dev);  // 100 B
    const MemoryStats s = dev.pool().stats();
    EXPECT_EQ(s.live_total, 500);
    EXPECT_EQ(s.peak_total, 600);
    EXPECT_EQ(s.peak_by_category[static_cast<int>(Category::weights)], 400);
    EXPECT_EQ(s.peak_by_category[static_cast<int>(Category::activations)], 200);
    EXPECT_EQ(s.peak_by_category[static_cast<int>(Category::gradients)], 0);
    EXPECT_EQ(s.max_by_category[static_cast<int>(Category::gradients)], 100);
    EXPECT_EQ(s.alloc_count, 3);
    EXPECT_EQ(s.free_count, 1);
  }
  EXPECT_EQ(dev.pool().live_total(), 0);
}

TEST(MemoryPool, MetaAccountsIdenticallyWithoutBytes) {
  Device cpu(cpu_backend()), meta(meta_backend());
  for (Device* d : {&cpu, &meta}) {
    Tensor t = Tensor::empty({1000, 3}, DType::bf16, Category::temporary, *d);
    EXPECT_EQ(d->pool().live(Category::temporary), 6000);
    EXPECT_EQ(t.raw() == nullptr, d->is_meta());
  }
}

TEST(MemoryPool, CapacityThrowsWithBreakdown) {
  Device dev(meta_backend());
  dev.pool().set_capacity(1000);
  dev.pool().set_phase("forward h.0");
  Tensor w = Tensor::empty({200}, DType::f32, Category::weights, dev);  // 800 B
  try {
    Tensor a = Tensor::empty({100}, DType::f32, Category::activations, dev);  // 400 B
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("400 B"), std::string::npos) << msg;
    EXPECT_NE(msg.find("activations"), std::string::npos) << msg;
    EXPECT_NE(msg.find("forward h.0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("weights: 800 B"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1000 bytes"), std::string::npos) << msg;
  }
  EXPECT_EQ(dev.pool().live_total(), 800);  // the failed request left nothing behind
}

TEST(MemoryPool, ParsesSizesAndPresets) {
  EXPECT_EQ(parse_bytes("16GiB"), int64_t{16} << 30);
  EXPECT_EQ(parse_bytes("512MB"), 512000000);
  EXPECT_EQ(parse_bytes("1e9"), 1000000000);
  EXPECT_EQ(parse_device_memory("v100-16gb"), int64_t{16} << 30);
  EXPECT_EQ(parse_device_memory("a100-80gb"), int64_t{80} << 30);
  EXPECT_THROW(parse_device_memory("v200-9gb"), Error);
  EXPECT_THROW(parse_bytes("12 parsecs"), Error);
}

TEST(MemoryPool, TimelineRecordsEveryEventWithPhase) {
  Device dev(meta_backend());
  dev.pool().enable_timeline(true);
  dev.pool().set_phase("step 0");
  { Tensor t = Tensor::empty({4}, DType::f32, Category::kv_cache, dev); }
  auto ev = dev.pool().timeline();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].bytes, 16);
  EXPECT_EQ(ev[1].bytes, -16);
  EXPECT_EQ(ev[0].category, Category::kv_cache);
  EXPECT_EQ(ev[0].phase, "step 0");
  EXPECT_EQ(ev[1].live_total, 0);
}

}  // namespace memory_test
}  // namespace
}  // namespace snug

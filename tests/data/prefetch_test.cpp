// Background prefetching returns exactly the synchronous loader's batches, accounts its staging
// slots in input_data, and passes a producer error to the consumer.
#include "data/prefetch.h"

#include <gtest/gtest.h>

#include "core/device.h"
#include "data/dataset.h"
#include "kernels/backends.h"

namespace snug {
namespace {
namespace prefetch_test {

TEST(Prefetcher, SameBatchesAsSynchronousLoading) {
  auto data = open_dataset("builtin", 256, 1);
  const int64_t B = 3, T = 17;
  DataLoader sync_loader(*data, B, T, 5), async_loader(*data, B, T, 5);
  Device dev(cpu_backend());
  Prefetcher p(async_loader, 2, 2, dev);
  EXPECT_EQ(p.slots(), 4);
  EXPECT_EQ(dev.pool().live(Category::input_data), 4 * 2 * B * T * 4);
  std::vector<int32_t> a(B * T), at(B * T), b(B * T), bt(B * T);
  for (int i = 0; i < 500; ++i) {  // crosses epoch boundaries
    sync_loader.next(a.data(), at.data());
    p.next(b.data(), bt.data());
    ASSERT_EQ(a, b) << "batch " << i;
    ASSERT_EQ(at, bt) << "batch " << i;
  }
}

TEST(Prefetcher, ZeroWorkersReadsInline) {
  auto data = open_dataset("dummy", 100, 1);
  DataLoader loader(*data, 2, 8, 5);
  Device dev(cpu_backend());
  Prefetcher p(loader, 0, 2, dev);
  EXPECT_EQ(p.slots(), 0);
  std::vector<int32_t> in(16), tg(16);
  p.next(in.data(), tg.data());
  EXPECT_EQ(loader.position(), 2);
}

TEST(Prefetcher, MetaDeviceAccountsSlotsButReadsNothing) {
  auto data = open_dataset("dummy", 100, 1);
  DataLoader loader(*data, 2, 8, 5);
  Device dev(meta_backend());
  Prefetcher p(loader, 1, 2, dev);
  EXPECT_EQ(dev.pool().live(Category::input_data), 2 * 2 * 2 * 8 * 4);
  EXPECT_EQ(loader.position(), 0);
}

}  // namespace prefetch_test
}  // namespace
}  // namespace snug

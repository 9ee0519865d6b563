// The host heap's large-block cache (core/host_heap.h): a freed block is reused by the next
// request of its size, and the mapped bytes (live + cached) never exceed the most ever live.
#include "core/host_heap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace snug {
namespace {
namespace host_heap_test {

constexpr int64_t kMiB = int64_t{1} << 20;

#define SKIP_WITHOUT_MAPPED_BLOCKS()                                                          \
  if (!host_heap_maps_large_blocks())                                                         \
  GTEST_SKIP() << "this build (AddressSanitizer) malloc's every block, so there is no cache " \
                  "to check"

TEST(HostHeap, BlocksAre64ByteAlignedAndWritable) {
  for (int64_t bytes : {int64_t{0}, int64_t{1}, int64_t{100}, kMiB - 1, kMiB, 3 * kMiB + 5}) {
    void* p = host_allocate(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    if (bytes > 0) std::memset(p, 0x5a, static_cast<size_t>(bytes));
    host_release(p, bytes);
  }
}

TEST(HostHeap, AFreedLargeBlockServesTheNextRequestOfItsSize) {
  SKIP_WITHOUT_MAPPED_BLOCKS();
  void* a = host_allocate(5 * kMiB + 3);
  host_release(a, 5 * kMiB + 3);
  const HostHeapStats before = host_heap_stats();
  void* b = host_allocate(5 * kMiB + 3);
  const HostHeapStats after = host_heap_stats();
  EXPECT_EQ(b, a);
  EXPECT_EQ(after.maps, before.maps);  // no new mapping: no page faults for the reuse
  EXPECT_EQ(after.cached_large_bytes, before.cached_large_bytes - 5 * kMiB - 4096);
  host_release(b, 5 * kMiB + 3);
}

TEST(HostHeap, ARequestOfAnotherSizeTakesTheCachedPagesBeforeFreshOnes) {
  SKIP_WITHOUT_MAPPED_BLOCKS();
  void* a = host_allocate(8 * kMiB);
  std::memset(a, 7, static_cast<size_t>(8 * kMiB));
  host_release(a, 8 * kMiB);
  const HostHeapStats s0 = host_heap_stats();
  ASSERT_GE(s0.cached_large_bytes, 8 * kMiB);
  // 6 MiB from the cache's resident pages (moved, carrying their contents): nothing fresh.
  void* b = host_allocate(6 * kMiB);
  const HostHeapStats s1 = host_heap_stats();
  EXPECT_EQ(s1.fresh_bytes, s0.fresh_bytes);
  EXPECT_EQ(s1.cached_large_bytes, s0.cached_large_bytes - 6 * kMiB);
  EXPECT_EQ(s1.live_large_bytes + s1.cached_large_bytes,
            s0.live_large_bytes + s0.cached_large_bytes);
  std::memset(b, 1, static_cast<size_t>(6 * kMiB));
  host_release(b, 6 * kMiB);
  host_release(host_allocate(3 * kMiB), 3 * kMiB);
  EXPECT_EQ(host_heap_stats().fresh_bytes, s0.fresh_bytes);
}

// The pattern that fragmented glibc's heap while a QLoRA base loaded: a big staging block, a
// small long-lived block made from it, the staging freed, then a staging block of another size.
TEST(HostHeap, MappedBytesStayWithinTheMostEverLive) {
  SKIP_WITHOUT_MAPPED_BLOCKS();
  const HostHeapStats start = host_heap_stats();
  std::vector<std::pair<void*, int64_t>> kept;
  int64_t live_kept = 0;
  const int64_t staging_sizes[] = {64 * kMiB, 172 * kMiB, 64 * kMiB, 64 * kMiB, 172 * kMiB};
  int64_t most = 0;
  for (int round = 0; round < 8; ++round) {
    const int64_t s = staging_sizes[round % 5] + round * 4096;  // no two sizes alike
    void* staging = host_allocate(s);
    std::memset(staging, 1, static_cast<size_t>(s));
    const int64_t k = s / 8;
    void* codes = host_allocate(k);
    kept.emplace_back(codes, k);
    live_kept += k;
    most = std::max(most, live_kept + s);
    host_release(staging, s);
    const HostHeapStats now = host_heap_stats();
    // Mapped bytes stay within the most ever live at once: before this test, or in it (+ page
    // rounding). glibc's heap, trimming off, grew by the freed staging blocks instead.
    const int64_t bound = std::max(start.max_live_large_bytes,
                                   start.live_large_bytes + most + 2 * 4096 * (round + 1));
    EXPECT_LE(now.live_large_bytes + now.cached_large_bytes, bound) << "round " << round;
    EXPECT_LE(now.live_large_bytes + now.cached_large_bytes, now.max_live_large_bytes);
  }
  for (auto [p, k] : kept) host_release(p, k);
}

}  // namespace host_heap_test
}  // namespace
}  // namespace snug

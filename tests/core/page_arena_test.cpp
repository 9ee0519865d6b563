// The paged arena (core/page_arena.h), to the byte: best-fit placement with coalescing and the
// top given back, the two ranges, the pages backed, taken back and made (with the slack rule and
// the device's refusal), the pool's out-of-memory report, and a training run on paged host
// memory (tests/support/host_pages.h: pages taken back lose their access, so a kernel touching
// one would fault) that gives the plain cpu run's losses bit for bit while the books-only replay
// a plan keeps states its pages exactly.
#include "core/page_arena.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "core/memory.h"
#include "kernels/backends.h"
#include "support/configs.h"
#include "support/expect_error.h"
#include "support/gpt2_train.h"
#include "support/host_pages.h"
#include "train/training_args.h"

namespace snug {
namespace {
namespace page_arena_test {

using testing_data::error_message;
using testing_data::HasSubstr;

constexpr int64_t kPage = 4096;  // the host's page, so HostPages can protect each one

// The runs of the backing's last take-back as (range, first page, count).
using Runs = std::vector<std::tuple<int, int64_t, int64_t>>;
Runs last_runs(const test::HostPages& host) {
  Runs r;
  for (const PageBacking::Run& run : host.last_unmapped())
    r.emplace_back(run.range, run.first, run.count);
  return r;
}

TEST(PageArena, BestFitCoalescesAndGivesTheTopBack) {
  PageArena a(nullptr, kPage);
  const auto pa = a.place(1000, Category::activations);  // 1024 bytes at 0
  const auto pb = a.place(3000, Category::activations);  // 3072 at 1024
  const auto pc = a.place(500, Category::activations);   // 512 at 4096
  const auto pd = a.place(100, Category::temporary);     // 256 at 4608
  ASSERT_TRUE(pa && pb && pc && pd);
  EXPECT_EQ(pa->range, 1);
  EXPECT_EQ(pa->offset, 0);
  EXPECT_EQ(pb->offset, 1024);
  EXPECT_EQ(pc->offset, 4096);
  EXPECT_EQ(pd->offset, 4608);
  EXPECT_EQ(a.stats().virtual_bytes, 4864);
  a.remove(*pb, 3000);  // a hole [1024, 4096)
  a.remove(*pd, 100);   // the top goes back to 4608
  const auto pe = a.place(256, Category::temporary);
  ASSERT_TRUE(pe);
  EXPECT_EQ(pe->offset, 1024);  // the hole, not the top
  const auto pf = a.place(2816, Category::activations);
  ASSERT_TRUE(pf);
  EXPECT_EQ(pf->offset, 1280);  // exactly the rest of the hole
  a.remove(*pa, 1000);
  a.remove(*pe, 256);  // coalesces with the block before it: [0, 1280)
  const auto pg = a.place(1100, Category::activations);
  ASSERT_TRUE(pg);
  EXPECT_EQ(pg->offset, 0);
  EXPECT_EQ(a.stats().virtual_bytes, 4864);  // the highest top, not the current one
  EXPECT_EQ(a.stats().live_bytes, 1280 + 2816 + 512);
  EXPECT_EQ(a.stats().max_live_bytes, 1024 + 3072 + 512 + 256);
  // Long-lived categories start their own range at 0.
  const auto pw = a.place(10, Category::weights);
  const auto po = a.place(10, Category::optimizer_state);
  ASSERT_TRUE(pw && po);
  EXPECT_EQ(pw->range, 0);
  EXPECT_EQ(pw->offset, 0);
  EXPECT_EQ(po->offset, 256);
  EXPECT_EQ(a.address(*pw), nullptr);  // books alone
}

TEST(PageArena, BacksTakesBackAndMakesPagesExactly) {
  test::HostPages host(64, INT64_MAX, kPage);
  PageArena a(&host);
  const auto x1 = a.place(8 * kPage, Category::activations);  // pages 0-7
  const auto x2 = a.place(8 * kPage, Category::activations);  // pages 8-15
  ASSERT_TRUE(x1 && x2);
  EXPECT_EQ(a.stats().physical_pages, 16);
  std::memset(a.address(*x1), 1, 8 * kPage);  // mapped: writable
  a.remove(*x1, 8 * kPage);                   // pages 0-7 idle, still backed
  EXPECT_EQ(a.stats().mapped_pages, 16);
  // 12 pages do not fit the 8-page hole: at the top, pages 16-27. Making 12 more (28 pages)
  // would pass 1.02 x the most live (20 pages) + 4 pages, so idle ones come back first: all 8
  // (fewer than the 12 it lacks).
  const auto x3 = a.place(12 * kPage, Category::activations);
  ASSERT_TRUE(x3);
  EXPECT_EQ(x3->offset, 16 * kPage);
  EXPECT_EQ(host.unmap_calls(), 1);
  EXPECT_EQ(last_runs(host), (Runs{{1, 0, 8}}));
  EXPECT_EQ(a.stats().physical_pages, 20);
  EXPECT_EQ(host.physical(), 20);
  EXPECT_EQ(a.stats().mapped_pages, 20);
  EXPECT_EQ(a.stats().unmaps, 8);
  EXPECT_EQ(a.stats().take_backs, 1);
  // The hole's 8 pages again: 28 pages are within 1.02 x 28 live + 4, so they are made.
  const auto x4 = a.place(8 * kPage, Category::activations);
  ASSERT_TRUE(x4);
  EXPECT_EQ(x4->offset, 0);
  EXPECT_EQ(a.stats().physical_pages, 28);
  EXPECT_EQ(a.stats().maps, 8 + 8 + 12 + 8);
  EXPECT_EQ(a.stats().take_backs, 1);
  EXPECT_EQ(a.stats().reserved_bytes(), 28 * kPage);
  std::memset(a.address(*x4), 2, 8 * kPage);  // backed again: writable
  EXPECT_EQ(host.spare(), 0);
}

TEST(PageArena, TakesBackOnlyWhatItLacksHighestFirst) {
  {
    // 10 idle pages in the long-lived range; 6 lacking for activations past the slack
    // (16 pages > 1.02 x 10 + 4): pages 4-9 come back, not all 10.
    test::HostPages host(64, INT64_MAX, kPage);
    PageArena a(&host);
    const auto w = a.place(10 * kPage, Category::weights);
    ASSERT_TRUE(w);
    a.remove(*w, 10 * kPage);
    const auto x = a.place(6 * kPage, Category::activations);
    ASSERT_TRUE(x);
    ASSERT_EQ(host.unmap_calls(), 1);
    EXPECT_EQ(last_runs(host), (Runs{{0, 4, 6}}));
    EXPECT_EQ(a.stats().physical_pages, 10);
    EXPECT_EQ(a.stats().unmaps, 6);
  }
  {
    // Idle pages in both ranges, fewer than lacking: the rest range's first, then the
    // long-lived one's, in one take-back.
    test::HostPages host(64, INT64_MAX, kPage);
    PageArena a(&host);
    const auto w = a.place(6 * kPage, Category::weights);      // range 0, pages 0-5
    const auto x = a.place(6 * kPage, Category::activations);  // range 1, pages 0-5
    const auto y = a.place(2 * kPage, Category::activations);  // range 1, pages 6-7
    ASSERT_TRUE(w && x && y);
    a.remove(*w, 6 * kPage);
    a.remove(*x, 6 * kPage);
    // 24 pages at the top of range 1 (pages 8-31): 38 pages > 1.02 x 26 + 4, so all 12 idle
    // pages come back and 12 are made.
    const auto z = a.place(24 * kPage, Category::temporary);
    ASSERT_TRUE(z);
    EXPECT_EQ(z->offset, 8 * kPage);
    ASSERT_EQ(host.unmap_calls(), 1);
    EXPECT_EQ(last_runs(host), (Runs{{1, 0, 6}, {0, 0, 6}}));
    EXPECT_EQ(a.stats().physical_pages, 26);
    EXPECT_EQ(a.stats().take_backs, 1);
  }
}

TEST(PageArena, PoolReportsTheDeviceRefusingPagesAndTakesIdleOnesBack) {
  test::PagedCpuBackend backend(64, /*limit_pages=*/10, kPage);
  Device dev(backend);
  ASSERT_TRUE(dev.pool().paged());
  MemoryPool& pool = dev.pool();
  const PoolBlock w = pool.allocate(8 * kPage, Category::weights);
  ASSERT_NE(w.ptr, nullptr);
  EXPECT_THROW(pool.allocate(4 * kPage, Category::activations), OutOfMemoryError);
  const std::string msg = error_message([&] { pool.allocate(4 * kPage, Category::activations); });
  EXPECT_TRUE(HasSubstr(msg, "tried to allocate"));
  EXPECT_TRUE(HasSubstr(msg, "for activations"));
  EXPECT_TRUE(HasSubstr(msg, "refused more pages"));
  EXPECT_EQ(pool.live_total(), 8 * kPage);  // nothing recorded for the refused block
  pool.release(w, 8 * kPage, Category::weights);
  // 4 pages: the slack allows making them, the device refuses, so 4 of the 8 idle pages come
  // back, the highest first (pages 4-7 of the long-lived range).
  const PoolBlock b = pool.allocate(4 * kPage, Category::activations);
  ASSERT_NE(b.ptr, nullptr);
  std::memset(b.ptr, 3, 4 * kPage);
  const MemoryStats s = pool.stats();
  ASSERT_TRUE(s.pages.has_value());
  EXPECT_EQ(s.pages->physical_pages, 8);
  EXPECT_EQ(s.pages->take_backs, 1);
  EXPECT_EQ(s.pages->unmaps, 4);
  EXPECT_EQ(s.pages->mapped_pages, 8);
  pool.release(b, 4 * kPage, Category::activations);
}

TrainingArguments paged_run() {
  TrainingArguments a;
  a.data = "builtin";
  a.seq_len = 32;
  a.per_device_train_batch_size = 4;
  a.max_steps = 3;
  a.learning_rate = 1e-3;
  a.gradient_checkpointing = true;  // frees and remakes blocks of many sizes each step
  return a;
}

TEST(PageArena, TrainingOnPagedMemoryGivesTheCpuLossesAndThePlannedPages) {
  const TrainingArguments a = paged_run();
  test::Gpt2Train plain(cpu_backend(), test::odd_config(), a);
  test::PagedCpuBackend backend(4096, INT64_MAX, kPage);
  test::Gpt2Train paged(backend, test::odd_config(), a);
  test::Gpt2Train books(meta_backend(), test::odd_config(), a, 42, {},
                        [](Device& d) { d.pool().use_pages(nullptr, kPage); });
  ASSERT_TRUE(plain.result.error.empty()) << plain.result.error;
  ASSERT_TRUE(paged.result.error.empty()) << paged.result.error;
  ASSERT_EQ(paged.result.loss.size(), 3u);
  EXPECT_EQ(paged.result.loss, plain.result.loss);  // bit for bit
  const MemoryStats p = paged.dev.pool().stats(), m = books.dev.pool().stats();
  EXPECT_EQ(p.peak_total, plain.dev.pool().stats().peak_total);
  ASSERT_TRUE(p.pages && m.pages);
  EXPECT_EQ(p.pages->physical_pages, m.pages->physical_pages);
  EXPECT_EQ(p.pages->maps, m.pages->maps);
  EXPECT_EQ(p.pages->unmaps, m.pages->unmaps);
  EXPECT_EQ(p.pages->take_backs, m.pages->take_backs);
  EXPECT_EQ(p.pages->virtual_bytes, m.pages->virtual_bytes);
  EXPECT_GT(p.pages->take_backs, 0);  // pages were taken back (12 times at this writing) and reused
  // Within the slack of the most live bytes, and at least the peak.
  EXPECT_GE(p.pages->reserved_bytes(), p.peak_total);
  EXPECT_LE(static_cast<double>(p.pages->reserved_bytes()),
            static_cast<double>(p.pages->max_live_bytes) * (1.0 + kPageArenaSlack) +
                2.0 * kPageArenaRanges * kPage);
}

}  // namespace page_arena_test
}  // namespace
}  // namespace snug

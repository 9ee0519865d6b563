// The data loader's rank seam (data/batches.h, DataShard): `world` ranks reading B rows each see,
// rank after rank, exactly the rows one process reading world * B sees, in the same order and
// across epochs: for a token stream, for jsonl examples padded (each rank padding to its own
// longest row), grouped by length, and packed, and through a prefetcher. The loader's state is
// the whole batch's on every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "data/batches.h"
#include "data/loader.h"
#include "data/prefetch.h"
#include "kernels/backends.h"

namespace snug {
namespace {
namespace data_shard_test {

struct Rows {
  int64_t cols = 0;
  std::vector<int32_t> in, tg, pos;  // (rows, cols)
};

Rows take(BatchSource& src, int64_t rows) {
  const int64_t T = src.seq_len();
  Rows r;
  r.in.assign(static_cast<size_t>(rows * T), -7);
  r.tg = r.in;
  r.pos = r.in;
  r.cols =
      src.next_rows(rows, r.in.data(), r.tg.data(), src.has_positions() ? r.pos.data() : nullptr);
  const auto n = static_cast<size_t>(rows * r.cols);
  r.in.resize(n);
  r.tg.resize(n);
  r.pos.resize(src.has_positions() ? n : 0);
  return r;
}

// Row b of `r` cut to `cols` columns; what lies beyond them must be padding (kIgnoreIndex
// targets, `pad` inputs).
std::vector<int32_t> row(const std::vector<int32_t>& v, int64_t b, int64_t width, int64_t cols) {
  const auto at = v.begin() + static_cast<std::ptrdiff_t>(b * width);
  return {at, at + static_cast<std::ptrdiff_t>(cols)};
}

// Reads `batches` batches of world * B rows from `make(B*world, {0, 1})` and of B rows from
// `make(B, {r, world})` for each rank r, and checks the ranks' rows are the whole batch's.
void expect_ranks_make_the_batch(
    const std::function<std::unique_ptr<BatchSource>(int64_t, const DataShard&)>& make, int64_t B,
    int64_t world, int batches, int32_t pad, const std::string& what) {
  std::unique_ptr<BatchSource> whole = make(B * world, {});
  std::vector<std::unique_ptr<BatchSource>> ranks;
  for (int64_t r = 0; r < world; ++r) ranks.push_back(make(B, {r, world}));
  EXPECT_EQ(ranks[0]->batches_per_epoch(), whole->batches_per_epoch()) << what;
  for (int k = 0; k < batches; ++k) {
    const Rows all = take(*whole, B * world);
    int64_t widest = 0;
    for (int64_t r = 0; r < world; ++r) {
      const Rows mine = take(*ranks[static_cast<size_t>(r)], B);
      widest = std::max(widest, mine.cols);
      ASSERT_LE(mine.cols, all.cols) << what << " batch " << k;
      for (int64_t b = 0; b < B; ++b) {
        const int64_t g = r * B + b;  // the row in the whole batch
        const std::string at = what + " batch " + std::to_string(k) + " rank " + std::to_string(r) +
                               " row " + std::to_string(b);
        EXPECT_EQ(row(mine.in, b, mine.cols, mine.cols), row(all.in, g, all.cols, mine.cols)) << at;
        EXPECT_EQ(row(mine.tg, b, mine.cols, mine.cols), row(all.tg, g, all.cols, mine.cols)) << at;
        if (!mine.pos.empty()) {
          EXPECT_EQ(row(mine.pos, b, mine.cols, mine.cols), row(all.pos, g, all.cols, mine.cols))
              << at;
        }
        for (int64_t c = mine.cols; c < all.cols; ++c) {  // the whole batch's longer padding
          EXPECT_EQ(all.in[static_cast<size_t>(g * all.cols + c)], pad) << at;
          EXPECT_EQ(all.tg[static_cast<size_t>(g * all.cols + c)], kIgnoreIndex) << at;
        }
      }
      EXPECT_EQ(ranks[static_cast<size_t>(r)]->epoch(), whole->epoch()) << what;
      EXPECT_EQ(ranks[static_cast<size_t>(r)]->position(), whole->position()) << what;
    }
    EXPECT_EQ(widest, all.cols) << what << " batch " << k;  // each rank pads to its own longest
  }
}

std::vector<Example> examples(int n) {
  std::vector<Example> out;
  int32_t next = 1;
  for (int i = 0; i < n; ++i) {
    Example e;
    const int len = 1 + (i * 7) % 13;
    for (int k = 0; k < len; ++k) {
      e.ids.push_back(next);
      e.labels.push_back(k == 0 ? kIgnoreIndex : next);
      ++next;
    }
    out.push_back(e);
  }
  return out;
}

TEST(DataShard, RanksReadTheRowsOfOneProcessWithTheirWholeBatch) {
  std::vector<int32_t> tokens(1000);
  std::iota(tokens.begin(), tokens.end(), 0);
  const InMemoryTokenSource stream(std::move(tokens), "iota");
  // 130 rows: epochs end inside batches, and grouping by length makes several megabatches of
  // 50 global batches when B is 1.
  const std::vector<Example> ex = examples(130);
  for (const int64_t world : {2, 3})
    for (const int64_t B : {1, 3}) {
      const std::string shape = " world " + std::to_string(world) + " B " + std::to_string(B);
      expect_ranks_make_the_batch(
          [&](int64_t b, const DataShard& s) {
            return std::make_unique<DataLoader>(stream, b, 8, 11, true, s);
          },
          B, world, 40, 0, "token stream" + shape);
      for (const bool packing : {false, true})
        for (const bool grouped : {false, true}) {
          if (packing && grouped) continue;
          ExampleBatching how;
          how.packing = packing;
          how.group_by_length = grouped;
          how.pad_id = 99;
          const ExampleData data(ex, "examples", how);
          expect_ranks_make_the_batch(
              [&](int64_t b, const DataShard& s) { return data.batches(b, 16, 5, true, s); }, B,
              world, 80, packing ? 0 : 99,
              std::string(packing   ? "packed"
                          : grouped ? "grouped"
                                    : "padded") +
                  shape);
        }
    }
}

TEST(DataShard, APrefetchedRankReadsWhatTheSynchronousOneDoes) {
  const std::vector<Example> ex = examples(40);
  ExampleBatching how;
  const ExampleData data(ex, "examples", how);
  Device dev(cpu_backend());
  std::unique_ptr<BatchSource> sync = data.batches(3, 16, 5, true, {1, 2});
  std::unique_ptr<BatchSource> async_src = data.batches(3, 16, 5, true, {1, 2});
  Prefetcher p(*async_src, 2, 2, dev);
  for (int b = 0; b < 20; ++b) {
    std::vector<int32_t> in1(48, -7), tg1(48, -7), in2(48, -7), tg2(48, -7);
    const int64_t c1 = sync->next_rows(3, in1.data(), tg1.data(), nullptr);
    ASSERT_EQ(p.next(in2.data(), tg2.data(), nullptr), c1) << b;
    EXPECT_EQ(in1, in2) << b;
    EXPECT_EQ(tg1, tg2) << b;
  }
}

TEST(DataShard, ARankOutsideTheWorldIsRefused) {
  const std::vector<Example> ex = examples(5);
  const ExampleData data(ex, "examples", ExampleBatching{});
  EXPECT_THROW(data.batches(1, 16, 0, true, {2, 2}), Error);
  EXPECT_THROW(data.batches(1, 16, 0, true, {-1, 2}), Error);
  EXPECT_THROW(data.batches(1, 16, 0, true, {0, 0}), Error);
  EXPECT_NO_THROW(data.batches(1, 16, 0, true, {1, 2}));
}

}  // namespace data_shard_test
}  // namespace
}  // namespace snug

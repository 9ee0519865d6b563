// The shared OpenMP loop shapes of the fast kernels (kernels/parallel_loops.h): every column or
// element is visited exactly once, in blocks of the documented size, for sizes around the block
// edges (including 0 and a ragged last block).
#include "kernels/parallel_loops.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace snug::kernels::detail {
namespace {
namespace parallel_loops_test {

TEST(ParallelLoops, ColumnBlocksCoverEveryColumnOnceInBlocksOf64) {
  for (const int64_t C : {0, 1, 63, 64, 65, 130, 768}) {
    std::vector<int> visits(static_cast<size_t>(C), 0);
    std::vector<int64_t> widths(static_cast<size_t>((C + 63) / 64), -1);
    for_column_blocks(C, [&](int64_t c0, int64_t width) {
      ASSERT_EQ(c0 % kColumnBlock, 0) << "C=" << C;
      widths[static_cast<size_t>(c0 / kColumnBlock)] = width;  // one block per slot: no race
      for (int64_t j = 0; j < width; ++j) ++visits[static_cast<size_t>(c0 + j)];
    });
    for (int64_t c = 0; c < C; ++c) EXPECT_EQ(visits[static_cast<size_t>(c)], 1) << "C=" << C;
    for (size_t b = 0; b < widths.size(); ++b)
      EXPECT_EQ(widths[b], b + 1 < widths.size() ? 64 : C - 64 * static_cast<int64_t>(b))
          << "C=" << C << " block " << b;
  }
}

TEST(ParallelLoops, ChunksCoverEveryElementOnce) {
  for (const int64_t n : {0, 1, 4095, 4096, 4097, 10000}) {
    std::vector<int> visits(static_cast<size_t>(n), 0);
    for_chunks(n, 4096, [&](int64_t i0, int64_t i1) {
      ASSERT_EQ(i0 % 4096, 0) << "n=" << n;
      ASSERT_EQ(i1, std::min<int64_t>(n, i0 + 4096)) << "n=" << n;
      for (int64_t i = i0; i < i1; ++i) ++visits[static_cast<size_t>(i)];
    });
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(visits[static_cast<size_t>(i)], 1) << "n=" << n;
  }
}

}  // namespace parallel_loops_test
}  // namespace
}  // namespace snug::kernels::detail

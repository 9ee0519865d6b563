// The fixed orders of dist/rank_order.h: the chunks an all-reduce is cut into and the rank-order
// sum every communicator gives.
#include "dist/rank_order.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace snug::dist {
namespace {
namespace rank_order_test {

TEST(RankOrder, ChunksAreContiguousWithTheRemainderFirst) {
  // 10 over 3: 4, 3, 3.
  EXPECT_EQ(chunk_begin(10, 3, 0), 0u);
  EXPECT_EQ(chunk_begin(10, 3, 1), 4u);
  EXPECT_EQ(chunk_begin(10, 3, 2), 7u);
  EXPECT_EQ(chunk_begin(10, 3, 3), 10u);
  // Fewer elements than ranks: 1, 0, 0.
  EXPECT_EQ(chunk_begin(1, 3, 1), 1u);
  EXPECT_EQ(chunk_begin(1, 3, 3), 1u);
  EXPECT_EQ(chunk_begin(0, 2, 2), 0u);
  EXPECT_EQ(chunk_begin(12, 4, 3), 9u);
}

TEST(RankOrder, ScratchIsThePeersCopiesOfThisRanksPart) {
  EXPECT_EQ(all_reduce_scratch_elements(10, 3, 0), 8u);  // 2 peers x 4
  EXPECT_EQ(all_reduce_scratch_elements(10, 3, 2), 6u);  // 2 peers x 3
  EXPECT_EQ(all_reduce_scratch_elements(10, 1, 0), 0u);
  EXPECT_EQ(reduce_scatter_scratch_elements(5, 4), 15u);
}

TEST(RankOrder, SumsLeftToRightInRankOrder) {
  // 1 + 1e8 rounds to 1e8 in float (its ulp is 8), so (1 + 1e8) - 1e8 = 0, while the reverse
  // order gives -1e8 + 1e8 + 1 = 1.
  const float a[] = {1.0f}, b[] = {1e8f}, c[] = {-1e8f};
  const float* forward[] = {a, b, c};
  const float* backward[] = {c, b, a};
  float out = -1.0f;
  sum_in_rank_order(forward, 3, &out, 1);
  EXPECT_EQ(out, 0.0f);
  sum_in_rank_order(backward, 3, &out, 1);
  EXPECT_EQ(out, 1.0f);
  // One input: its bits, -0 included (0 + -0 would be +0).
  const float minus_zero[] = {-0.0f};
  const float* one[] = {minus_zero};
  sum_in_rank_order(one, 1, &out, 1);
  EXPECT_TRUE(std::signbit(out));
}

TEST(RankOrder, OutMayBeOneOfTheInputsAcrossBlocks) {
  // 1300 elements: three blocks of the accumulator; out is input 1 (a rank's own chunk in place).
  const size_t n = 1300;
  std::vector<double> x0(n), x1(n), x2(n), expected(n);
  for (size_t i = 0; i < n; ++i) {
    x0[i] = 1e16 * ((i % 3) + 1.0);
    x1[i] = static_cast<double>(i) + 0.5;
    x2[i] = -x0[i];
    expected[i] = (x0[i] + x1[i]) + x2[i];
  }
  const double* inputs[] = {x0.data(), x1.data(), x2.data()};
  sum_in_rank_order(inputs, 3, x1.data(), n);
  EXPECT_EQ(std::memcmp(x1.data(), expected.data(), n * sizeof(double)), 0);
  // Sanity of the values: the order matters for them (1e16 + i + 0.5 rounds).
  EXPECT_NE(expected[1], 1.5);
}

TEST(RankOrder, SumsIntegersExactly) {
  const int64_t a[] = {INT64_C(1) << 62}, b[] = {-(INT64_C(1) << 62)}, c[] = {3};
  const int64_t* inputs[] = {a, b, c};
  int64_t out = 0;
  sum_in_rank_order(inputs, 3, &out, 1);
  EXPECT_EQ(out, 3);
}

}  // namespace rank_order_test
}  // namespace
}  // namespace snug::dist

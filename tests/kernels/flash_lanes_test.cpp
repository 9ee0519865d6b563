// The tiled flash kernels' thread layouts (kernels/cuda/flash_lanes.h), held on the host: what
// the kernels rely on (every slot taken once; a row's 16 threads in one warp, reached by the
// reduction masks in the same tx-bit order in both layouts, so the same sums) and what the pairs
// layout is for (the shared-memory pairing rule for both kinds of 128-bit loads).
#include "kernels/cuda/flash_lanes.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>

namespace snug::cuda {
namespace {
namespace flash_lanes_test {

constexpr FlashLanes kLayouts[] = {FlashLanes::rows, FlashLanes::pairs};

TEST(FlashLanes, EverySlotTakenOnce) {
  for (const FlashLanes lanes : kLayouts) {
    std::set<std::pair<int, int>> slots;
    for (int t = 0; t < kTileSlotThreads; ++t) {
      const TileSlot s = tile_slot(t, lanes);
      ASSERT_GE(s.ty, 0);
      ASSERT_LT(s.ty, 16);
      ASSERT_GE(s.tx, 0);
      ASSERT_LT(s.tx, 16);
      slots.insert({s.ty, s.tx});
    }
    EXPECT_EQ(slots.size(), 256u);
  }
}

TEST(FlashLanes, RowReductionsStayInTheRowInTheSameOrder) {
  for (const FlashLanes lanes : kLayouts) {
    for (int t = 0; t < kTileSlotThreads; ++t) {
      const TileSlot s = tile_slot(t, lanes);
      for (int bit = 0; bit < 4; ++bit) {
        const int lane = t % 32,
                  other = t - lane + static_cast<int>(lane ^ row_lane_mask(bit, lanes));
        ASSERT_LT(row_lane_mask(bit, lanes), 32u);
        const TileSlot o = tile_slot(other, lanes);
        EXPECT_EQ(o.ty, s.ty) << t << " bit " << bit;
        EXPECT_EQ(o.tx, s.tx ^ (1 << bit)) << t << " bit " << bit;
      }
    }
  }
}

// The pairing rule of 128-bit shared loads: every lane pair (n, n ^ 1), or every pair (n, n ^ 2),
// of a warp reads one address. ty-indexed loads read one address where ty agrees, tx-indexed ones
// where tx agrees.
bool pairs_share(FlashLanes lanes, bool by_ty) {
  for (int mask : {1, 2}) {
    bool all = true;
    for (int t = 0; t < kTileSlotThreads; ++t) {
      const TileSlot a = tile_slot(t, lanes), b = tile_slot(t ^ mask, lanes);
      all = all && (by_ty ? a.ty == b.ty : a.tx == b.tx);
    }
    if (all) return true;
  }
  return false;
}

TEST(FlashLanes, PairsMeetTheSharedLoadPairingRuleForBothOperands) {
  EXPECT_TRUE(pairs_share(FlashLanes::pairs, true));
  EXPECT_TRUE(pairs_share(FlashLanes::pairs, false));
  // The rows layout, the reason for the other: its tx-indexed loads take 4 cycles a warp.
  EXPECT_TRUE(pairs_share(FlashLanes::rows, true));
  EXPECT_FALSE(pairs_share(FlashLanes::rows, false));
}

}  // namespace flash_lanes_test
}  // namespace
}  // namespace snug::cuda

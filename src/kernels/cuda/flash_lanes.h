// Which thread of a tiled flash block (kernels/cuda/flash_tiled.cu: 256 threads, a 64 x 64 score
// tile as a 16 x 16 grid of 4 x 4 register tiles) takes which slot (ty, tx) of the grid. Every
// thread computes the same values in the same order whatever the layout; the layout only decides
// which hardware lanes share a shared-memory load, so both give the same bits.
//
// Why it matters. The inner products read 128-bit words from shared memory: rows ty + 16i of one
// operand (the same address for every thread of a row) and rows tx + 16j of the other (or, in
// p v, dims 4tx .. 4tx + 3). Shared memory returns 128 bytes a cycle, so an LDS.128 takes 4 cycles
// for a warp, unless the threads of every lane pair (n, n ^ 1) or every pair (n, n ^ 2) read the
// same address: then 2 (docs/cuda.md, "The fp32 flash kernels' thread layout", has the sources).
// A thread makes 4 loads of each kind per 64 FMAs: at 2 + 4 cycles a pair, 24 cycles of loads
// against 16 of FMAs an SM, per warp.
//   rows   (the first layout) ty = thread / 16, tx = thread % 16: a warp holds rows 2w and 2w + 1,
//          lanes 0-15 and 16-31. The ty-indexed loads meet the rule (n and n ^ 1 share ty); the
//          tx-indexed ones meet neither (n, n ^ 1 and n ^ 2 differ in tx): 2 + 4 cycles.
//   pairs  lane bit 0 chooses the row, bits 1-4 are tx: lanes n and n ^ 1 share tx, lanes n and
//          n ^ 2 share ty, so both kinds meet the rule: 2 + 2 cycles, as many as the FMAs.
// The 16 threads of a row stay in one warp in both layouts, so the row reductions (max and sum
// over a row's scores) are warp shuffles: across lane bits 0-3 (rows) or 1-4 (pairs), in both
// layouts pairing tx bit 3, then 2, 1, 0, so the sums add in the same order.
// Plain C++ (constexpr, so device code calls it under --expt-relaxed-constexpr): the host tests
// hold the layouts to these properties (tests/kernels/flash_lanes_test.cpp).
#pragma once

namespace snug::cuda {

enum class FlashLanes { rows, pairs };

struct TileSlot {
  int ty = 0, tx = 0;  // the thread's rows ty + 16i and columns tx + 16j (dims 4tx + 64j) of a tile
};

constexpr int kTileSlotThreads = 256;

// The slot of thread `thread` (0 .. 255) of the block.
constexpr TileSlot tile_slot(int thread, FlashLanes lanes) {
  if (lanes == FlashLanes::rows) return {thread / 16, thread % 16};
  const int warp = thread / 32, lane = thread % 32;
  return {2 * warp + (lane & 1), lane >> 1};
}

// The lane mask that pairs a thread with the thread of its row whose tx differs in bit `bit`
// (0 .. 3): the butterfly step of the row reductions.
constexpr unsigned row_lane_mask(int bit, FlashLanes lanes) {
  return 1u << (lanes == FlashLanes::rows ? bit : bit + 1);
}

}  // namespace snug::cuda

// Internal to the fast kernels: the two OpenMP loop shapes several of them share, written once.
//   for_column_blocks: blocks of kColumnBlock columns in parallel. A thread owns whole columns,
//     so a sum down the rows (a parameter gradient: dw, db, dwte) needs no reduction across
//     threads and is deterministic, with no scratch.
//   for_chunks: an elementwise range in chunks of `grain` elements in parallel.
// The body is a lambda, inlined into the OpenMP loop: the same code as the loop written out.
#pragma once

#include <algorithm>
#include <cstdint>

namespace snug::kernels::detail {

inline constexpr int64_t kColumnBlock = 64;

// Elements per chunk of an elementwise loop: kGrain where an element costs a few flops (the
// optimizer updates, bf16 reductions), kMathGrain where it costs a transcendental (activations).
inline constexpr int64_t kGrain = 8192;
inline constexpr int64_t kMathGrain = 4096;

// body(c0, width) for each block of columns [c0, c0 + width) of [0, C), width <= kColumnBlock.
template <typename Body>
void for_column_blocks(int64_t C, const Body& body) {
  const int64_t nblocks = (C + kColumnBlock - 1) / kColumnBlock;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < nblocks; ++blk) {
    const int64_t c0 = blk * kColumnBlock;
    body(c0, std::min(kColumnBlock, C - c0));
  }
}

// body(i0, i1) for each chunk [i0, i1) of [0, n), i1 - i0 <= grain.
template <typename Body>
void for_chunks(int64_t n, int64_t grain, const Body& body) {
#pragma omp parallel for schedule(static)
  for (int64_t i0 = 0; i0 < n; i0 += grain) body(i0, std::min(n, i0 + grain));
}

}  // namespace snug::kernels::detail

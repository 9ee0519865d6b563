// The fixed orders every implementation of communicator.h follows, so that results do not depend
// on timing and a test can compute the expected bits on one process.
#pragma once

#include <algorithm>
#include <cstddef>

namespace snug::dist {

// An n-element all-reduce is cut into `size` contiguous chunks, chunk j summed by rank j: the
// first n % size chunks have one element more. Chunk j is [chunk_begin(n, size, j),
// chunk_begin(n, size, j + 1)).
inline size_t chunk_begin(size_t n, int size, int j) {
  const size_t k = static_cast<size_t>(j), s = static_cast<size_t>(size);
  return n / s * k + std::min(k, n % s);
}

// The MPI communicator's host scratch (elements of the buffer's type) while a collective is in
// flight, for the planner: an all-reduce keeps the N-1 peers' copies of this rank's chunk, a
// reduce-scatter the N-1 peers' copies of this rank's slice; the others none.
inline size_t all_reduce_scratch_elements(size_t n, int size, int rank) {
  return static_cast<size_t>(size - 1) *
         (chunk_begin(n, size, rank + 1) - chunk_begin(n, size, rank));
}
inline size_t reduce_scatter_scratch_elements(size_t shard, int size) {
  return static_cast<size_t>(size - 1) * shard;
}

// out[i] = inputs[0][i] + inputs[1][i] + ... + inputs[count-1][i], added left to right (rank
// order) in T. out may be exactly one of the inputs (each element is read before it is written).
template <typename T>
void sum_in_rank_order(const T* const* inputs, int count, T* out, size_t n) {
  // Blocks of a local accumulator: each element is read from every input before its block is
  // written (so out may alias an input), and the inner loops run along contiguous memory.
  constexpr size_t kBlock = 512;
  T acc[kBlock];
  for (size_t b = 0; b < n; b += kBlock) {
    const size_t m = std::min(kBlock, n - b);
    for (size_t i = 0; i < m; ++i) acc[i] = inputs[0][b + i];
    for (int j = 1; j < count; ++j)
      for (size_t i = 0; i < m; ++i) acc[i] += inputs[j][b + i];
    for (size_t i = 0; i < m; ++i) out[b + i] = acc[i];
  }
}

}  // namespace snug::dist

// Checks shared by the tests of models composed with tests/support/block_lm.h: deterministic
// weights, a small batch (optionally packed documents with position ids) and the central
// finite-difference check of every parameter's gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "core/memory.h"
#include "support/block_lm.h"

namespace snug::test {

// A two-layer Llama-style configuration: 11 tokens, hidden 8, 4 heads over 2 kv heads (GQA),
// SwiGLU of 12, RMSNorm, full rotary with theta 100 (large angles even at T = 5).
BlockLMConfig llama_like();

// Deterministic weights: matrices N(0, 0.4), norm weights 1 + N(0, 0.1), biases N(0, 0.1).
void init_weights(BlockLM& m, uint64_t seed);

struct BlockBatch {
  int64_t B = 2, T = 5;
  std::vector<int32_t> tokens, targets;
  std::vector<int32_t> positions;  // (B,T) position ids, or empty: none
  const int32_t* pos() const { return positions.empty() ? nullptr : positions.data(); }
};
// B = 2, T = 5 tokens and targets over a vocabulary of V, one target ignored; no position ids.
BlockBatch batch(int64_t V);

// Every element of every parameter: backward's gradient (on the ref table) against central
// differences of the forward's double loss on batch b.
void check_gradients(const BlockLMSpec& spec, uint64_t seed, const BlockBatch& b);

// Two training steps (forward, backward, forward, backward, zero_grad) on cpu and on meta: the
// pool's peak, its split at the peak, every category's maximum, the live bytes and the numbers of
// allocations and frees agree to the byte, and nothing but the weights outlives backward.
// Returns the cpu run's statistics.
MemoryStats expect_meta_equals_cpu(const BlockLMSpec& spec, const BlockBatch& b, uint64_t seed);

}  // namespace snug::test

// Memory-efficient causal attention ("flash attention" on the CPU): tiled, online softmax.
//
// Same math as attention_forward/attention_backward in kernels/kernels.h, but what the forward
// saves for the backward is linear in T: the inputs qkv (B,T,3C), the output out (B,T,C) and
// lse (B,NH,T), one log-sum-exp per query row and head. The naive pair saves att (B,NH,T,T).
// The backward recomputes the probabilities tile by tile from q, k and lse.
//
// Conventions as in kernels/kernels.h: snug::kernels is the fast version, snug::ref the plain
// loops it is tested against; dqkv is overwritten; kernels never allocate tracked memory.
//
// Scratch (snug::kernels), per OpenMP thread, thread-local and independent of T:
//   forward:  kFlashTile^2 + 2 * kFlashTile floats   (one score tile, row max and row sum)
//   backward: 2 * kFlashTile^2 + 2 * kFlashTile floats (score/probability tile, dP/dS tile,
//             lse and D of one query tile)
// i.e. at most 2*64*64 + 128 floats = 33 KiB per thread. snug::ref uses O(T) doubles for one
// row of scores (forward) and O(B*T*3C) doubles to accumulate dqkv (backward).
#pragma once

#include <cstdint>

#include "kernels/attention_dims.h"

namespace snug {

// Declares each SNUG_OP entry as a function of the enclosing namespace.
#define SNUG_OP(ret, name, params) ret name params;

namespace kernels {
// Tile edge of the fast kernels: query tiles of kFlashTile rows against key tiles of
// kFlashTile keys.
inline constexpr int64_t kFlashTile = 64;
#include "kernels/flash_ops.inc"
}  // namespace kernels

namespace ref {
#include "kernels/flash_ops.inc"
}  // namespace ref

#undef SNUG_OP

}  // namespace snug

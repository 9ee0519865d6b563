// The dropout mask: which elements a dropout keeps, from a counter-based hash of (key, i), so that
// backward, recomputation (checkpointing) and a resumed run see forward's mask without anything
// stored. Used by LoRA's dropout (nn/lora.h), the hidden and attention-probability dropout of the
// encoder ops (kernels/ops.inc) and inside flash attention (regenerated per score in backward).
// Shared by the fast and the reference kernels: it is the mask's definition, not arithmetic. The
// CUDA kernels call these same functions from device code (constexpr, --expt-relaxed-constexpr),
// so the GPU's masks are the CPU's bit for bit.
#pragma once

#include <cstdint>

#include "core/random.h"

namespace snug::kernels {

constexpr bool dropout_keep(uint64_t key, int64_t i, double p) {
  // 53-bit uniform in [0, 1) from the (key, i) hash.
  const uint64_t h = splitmix64_mix(key + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(i + 1));
  return static_cast<double>(h >> 11) * 0x1.0p-53 >= p;
}

constexpr bool lora_keep(uint64_t key, int64_t i, double p) {
  return dropout_keep(key, i, p);
}

// The key whose element i draws what `key`'s element first + i draws: dropout_keep hashes
// key + kGamma * (i + 1), and a SplitMix64 stream from seed `key` (add_uniform_noise) draws
// splitmix64_mix(key + kGamma * (i + 1)) for element i, so moving the key by kGamma * first
// moves the index by `first`. Data parallelism uses it to draw, for a rank's rows, the masks and
// noise one process draws for those rows of the global batch (nn/run_context.h, at_first_row),
// without any kernel knowing of ranks.
constexpr uint64_t counter_key_at(uint64_t key, int64_t first) {
  return key + SplitMix64::kGamma * static_cast<uint64_t>(first);
}

}  // namespace snug::kernels

// Which flash attention kernels the CUDA backend runs (kernels/flash_ops.inc):
//   "tiled-pairs"  the default: FlashAttention-2-style tiles in shared memory (kernels/cuda/
//                  flash_tiled.cu), the threads laid out so that both operands' 128-bit shared
//                  loads take 2 cycles a warp (kernels/cuda/flash_lanes.h); cases outside the
//                  tiles (head size above 128, too little shared memory) run the simple kernels;
//   "tiled"        the same kernels and the same bits in the first layout, whose column loads
//                  take 4 cycles: 5% slower on an H200 (docs/cuda.md), kept to time against;
//   "simple"       one warp per row (kernels/cuda/flash.cu): the first kernels, kept as the
//                  fallback and as a second opinion.
// The environment variable SNUG_CUDA_FLASH (one of those names; unset or empty: "tiled-pairs") is
// read once, at the first flash call or the first call here; set_flash_variant overrides it (the
// tests run every variant). Plain C++: included by tests that do not compile CUDA.
#pragma once

namespace snug::cuda {

// Throws snug::Error naming the value unless name is one of the variants above.
void set_flash_variant(const char* name);
// The variant in force: "tiled-pairs", "tiled" or "simple".
const char* flash_variant();

}  // namespace snug::cuda

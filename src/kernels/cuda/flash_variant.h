// Which flash attention kernels the CUDA backend runs (kernels/flash_ops.inc):
//   "tiled"        FlashAttention-2-style tiles in shared memory (kernels/cuda/flash_tiled.cu),
//                  the default; cases outside it (head size above 128, too little shared memory)
//                  run the simple kernels;
//   "tiled-pairs"  the same kernels with the threads laid out so that both operands' 128-bit
//                  shared loads take 2 cycles a warp instead of 2 and 4 (kernels/cuda/
//                  flash_lanes.h): the same bits as "tiled", to be timed against it on a GPU;
//   "simple"       one warp per row (kernels/cuda/flash.cu): the first kernels, kept as the
//                  fallback and as a second opinion.
// The environment variable SNUG_CUDA_FLASH (one of those names; unset or empty: "tiled") is read
// once, at the first flash call or the first call here; set_flash_variant overrides it (the
// tests run every variant). Plain C++: included by tests that do not compile CUDA.
#pragma once

namespace snug::cuda {

// Throws snug::Error naming the value unless name is one of the variants above.
void set_flash_variant(const char* name);
// The variant in force: "tiled", "tiled-pairs" or "simple".
const char* flash_variant();

}  // namespace snug::cuda

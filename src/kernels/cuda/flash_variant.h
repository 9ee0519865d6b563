// Which flash attention kernels the CUDA backend runs (kernels/flash_ops.inc):
//   "tiled"   FlashAttention-2-style tiles in shared memory (kernels/cuda/flash_tiled.cu), the
//             default; cases outside it (head size above 128, too little shared memory) run
//             the simple kernels;
//   "simple"  one warp per row (kernels/cuda/flash.cu): the first kernels, kept as the fallback
//             and as a second opinion.
// The environment variable SNUG_CUDA_FLASH ("tiled" or "simple"; unset or empty: "tiled") is read
// once, at the first flash call or the first call here; set_flash_variant overrides it (the
// tests run both). Plain C++: included by tests that do not compile CUDA.
#pragma once

namespace snug::cuda {

// Throws snug::Error naming the value unless name is "tiled" or "simple".
void set_flash_variant(const char* name);
// "tiled" or "simple".
const char* flash_variant();

}  // namespace snug::cuda

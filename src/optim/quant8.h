// 8-bit block-wise quantization with a dynamic (tree) code, as bitsandbytes uses it for optimizer
// states (Dettmers et al., "8-bit Optimizers via Block-wise Quantization", arXiv:2110.02861;
// bitsandbytes functional.py::create_dynamic_map and quantize_blockwise, csrc/kernels.cu).
//
// A code is 256 sorted float values in [-1, 1]. A block of `block` consecutive elements keeps one
// fp32 absmax; element x is stored as the index of the code value nearest to x / absmax (ties go
// to the lower value, as torch.bucketize against the midpoints does) and read back as
// code[q] * absmax. The optimizer states use block 256 (bitsandbytes >= 0.44.0).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/quant_format.h"
#include "core/tensor.h"
#include "kernels/quant8_code.h"

namespace snug::quant8 {

// The dynamic map itself is owned by src/quant (quant::create_dynamic_map, quant::dynamic_map:
// bnb's create_dynamic_map in float32, bit-exact); the optimizers read it from there.
using quant::create_dynamic_map;

// The two maps the 8-bit optimizers use (quant::dynamic_map(true/false), built once).
const Code& signed_code();    // first moment (exp_avg)
const Code& unsigned_code();  // second moment (exp_avg_sq)

inline int64_t num_blocks(int64_t n, int64_t block) {
  return (n + block - 1) / block;
}

// Generic block-wise quantization of x[0..n): absmax[b] = max |x| over block b (the last block
// may be shorter), q[i] = code.nearest(x[i] / absmax) (absmax clamped to >= 1e-38 first).
void quantize_blockwise(const float* x, int64_t n, const Code& code, int64_t block, uint8_t* q,
                        float* absmax);
void dequantize_blockwise(const uint8_t* q, const float* absmax, int64_t n, const Code& code,
                          int64_t block, float* x);

// One moment of an 8-bit optimizer's per-parameter state (8-bit AdamW keeps exp_avg and
// exp_avg_sq, 8-bit Lion exp_avg): `values` holds n u8 codes (8-bit) or n f32 values, `absmax`
// one f32 per kOptimizerBlock elements (8-bit only). Pointers into the optimizer's own State.
struct Moment {
  const char* name;  // "exp_avg", "exp_avg_sq"
  Tensor* values;
  Tensor* absmax;
};
// Bytes of `moments` such moments of n elements: n + 4 per block each when 8-bit, else 4 n each.
int64_t moment_bytes(int64_t n, bool q8, int64_t moments);
// Zeroed optimizer_state tensors on dev, in bitsandbytes' order: every moment's values, then
// (8-bit) every moment's absmax.
void allocate_moments(const std::vector<Moment>& moments, int64_t n, bool q8, Device& dev);
// The checkpoint names in the same order: "<prefix>.<name>" for each, then (8-bit)
// "<prefix>.absmax_<name>".
void append_moments(const std::vector<Moment>& moments, const std::string& prefix, bool q8,
                    std::vector<std::pair<std::string, Tensor*>>& out);

}  // namespace snug::quant8

// 8-bit block-wise quantization with a dynamic (tree) code, as bitsandbytes uses it for optimizer
// states (Dettmers et al., "8-bit Optimizers via Block-wise Quantization", arXiv:2110.02861;
// bitsandbytes functional.py::create_dynamic_map and quantize_blockwise, csrc/kernels.cu).
//
// A code is 256 sorted float values in [-1, 1]. A block of `block` consecutive elements keeps one
// fp32 absmax; element x is stored as the index of the code value nearest to x / absmax (ties go
// to the lower value, as torch.bucketize against the midpoints does) and read back as
// code[q] * absmax. The optimizer states use block 256 (bitsandbytes >= 0.44.0).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "quant/quant.h"

namespace snug::quant8 {

inline constexpr int64_t kOptimizerBlock = 256;

// The dynamic map itself is owned by src/quant (quant::create_dynamic_map, quant::dynamic_map:
// bnb's create_dynamic_map in float32, bit-exact); the optimizers read it from there.
using quant::create_dynamic_map;

// A 256-entry code with the midpoints for nearest-value search.
class Code {
 public:
  explicit Code(const std::vector<float>& values);  // 256 sorted values
  float value(uint8_t q) const { return values_[q]; }
  const std::array<float, 256>& values() const { return values_; }
  // Index of the nearest code value (ties: the lower one). The fast path starts from a table
  // indexed by the top 16 bits of x (sign, exponent, 7 mantissa bits: the lower bound of the
  // bucket's smallest value) and steps over the few midpoints left inside the bucket; it equals
  // nearest_reference (a binary search over the midpoints) for every float, NaN and inf included.
  uint8_t nearest(float x) const;
  uint8_t nearest_reference(float x) const;
  // nearest(x) with bitsandbytes' sign fix for signed states: when the chosen code value's sign
  // differs from x's (a small negative x landing on 0), move one code towards x's sign.
  uint8_t nearest_signed(float x) const;

 private:
  std::array<float, 256> values_{};
  std::array<float, 255> mid_{};
  std::vector<uint8_t> start_;  // 65536 entries: nearest_reference(smallest float of the bucket)
};

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

}  // namespace snug::quant8

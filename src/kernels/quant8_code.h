// A 256-value code for 8-bit block-wise quantization (bitsandbytes' dynamic map, Dettmers et al.,
// "8-bit Optimizers via Block-wise Quantization", arXiv:2110.02861) with its nearest-value search.
// It lives with the kernels because the 8-bit optimizer kernels (kernels/optim_ops.inc) take it as
// an argument; which values it holds is the caller's business (optim/quant8.h builds the two maps
// the optimizers use from quant::dynamic_map).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace snug::quant8 {

// Elements per absmax block of the 8-bit optimizer states (bitsandbytes >= 0.44.0).
inline constexpr int64_t kOptimizerBlock = 256;

// 256 sorted float values in [-1, 1] with the midpoints for nearest-value search. Element x of a
// block with absmax a is stored as the index of the code value nearest to x / a (ties go to the
// lower value, as torch.bucketize against the midpoints does) and read back as code[q] * a.
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

}  // namespace snug::quant8

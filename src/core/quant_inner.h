// The inner loops of the blockwise quantizer (core/quant_format.cpp): a block's absmax and a full
// block's 4-bit codes for a code book in sorted order (nf4) on 16-float vectors, and the nearest
// entry of a 256-entry code book (dynamic8, double quantization) without branches. Issue 31:
// quantizing a 13B model's initial weights (12.7B values) took 3 ns a value with one float
// compared at a time and a mispredicted binary search per block. Each returns the bits of its
// plain loop in quant::ref (the definition the goldens hold against bitsandbytes;
// tests/quant/quant_inner_test.cpp holds the two together). GCC's vector extensions: AVX-512,
// AVX2 or SSE, whichever the build's -march gives.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace snug::quant {

namespace fast {
// max |x[i]|, i < n, for finite x (check_finite runs first): the largest magnitude, +0 for none.
float block_absmax(const float* x, int64_t n);
// The nibbles of x[0, n), n even: v = x[i] * inv clamped to [-1, 1] (bitsandbytes' full-block
// scaling), code = the number of bounds[0, 15) below v (a sorted code book's nearest entry, ties
// to the lower), two codes a byte, the first element in the high nibble: packed[0, n / 2).
void encode_block4(const float* x, int64_t n, float inv, const float* bounds, uint8_t* packed);
// The number of sorted[0, n) below v (std::lower_bound's index; torch.bucketize): the nearest
// code, ties to the lower. Each step keeps "every entry before pos is below v".
inline uint32_t count_below(const float* sorted, size_t n, float v) {
  size_t pos = 0;
  for (size_t step = std::bit_floor(n); step > 0; step >>= 1)
    pos += pos + step <= n && sorted[pos + step - 1] < v ? step : 0;
  return static_cast<uint32_t>(pos);
}
}  // namespace fast

namespace ref {
// The plain loops of the fast:: functions, one element at a time.
float block_absmax(const float* x, int64_t n);
void encode_block4(const float* x, int64_t n, float inv, const float* bounds, uint8_t* packed);
uint32_t count_below(const float* sorted, size_t n, float v);  // std::lower_bound
}  // namespace ref

}  // namespace snug::quant

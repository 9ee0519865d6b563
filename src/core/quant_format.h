// Quantization formats: quantize, dequantize, error statistics and exact storage sizes.
//
// Every format maps a float32 array to small integer codes plus per-group state (absmax/scale,
// zero point, code book). The algorithms and constants follow bitsandbytes (see
// docs/quantization.md and ../shared/research/techniques.md sections 1a, 1b and 2) so that the
// codes are bit-identical to the reference (tests/quant/quant_golden_test.cpp):
//
//   int8_absmax       symmetric, one fp32 absmax per tensor: q = round(x * 127/absmax) in
//                     [-127, 127] (round half to even), x' = q * absmax/127
//   int8_absmax_row   the same per row of the last dimension (bnb int8_vectorwise_quant)
//   int8_zeropoint    asymmetric min-max: uint8 q = clamp(zp + round(x/scale), 0, 255) with
//                     scale = (max(x,0) - min(x,0))/255, zp = -round(min(x,0)/scale) (torch's
//                     MinMaxObserver + quantize_per_tensor, quint8)
//   int8_blockwise    symmetric absmax int8 in blocks of K elements (the seed's block example)
//   dynamic8          bnb quantize_blockwise: blocks of K, x/absmax mapped to the nearest entry of
//                     the 8-bit dynamic (tree) map (signed, or unsigned for x >= 0)
//   quantile          k-bit codes at equal-probability quantiles of the data; the code book (2^k
//                     fp32 values) is stored with the codes; exact (sort) or approximate (sample)
//   nf4, fp4          bnb 4-bit blockwise (block 64 by default), one fp32 absmax per block,
//                     two codes per byte with the FIRST element in the HIGH nibble; optional
//                     double quantization (DQ) of the absmax values
//   int4              symmetric absmax int4 (q in [-7, 7], two's complement nibbles), blockwise
//                     and packed like nf4; the linear baseline NF4 is compared against
//
// The result holds plain std::vectors. Quantized weights kept in tracked memory (codes in a
// `weights` tensor, the rest in `quant_state`) are quant/weight_quant.h, which quantizes straight
// into its tensors through the *_into functions at the end of this file (storage_breakdown gives
// the two byte counts without quantizing anything, also on meta).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace snug::quant {

enum class Format : uint8_t {
  int8_absmax,
  int8_absmax_row,
  int8_zeropoint,
  int8_blockwise,
  dynamic8,
  quantile,
  nf4,
  fp4,
  int4,
};

const char* format_name(Format f);
// "int8_absmax", "int8_absmax_row", "int8_zeropoint", "int8_blockwise", "dynamic8", "quantile",
// "nf4", "fp4", "int4" (also "absmax" = int8_absmax, "blockwise" = int8_blockwise,
// "zeropoint" = int8_zeropoint, "dynamic" = dynamic8). Throws snug::Error on anything else.
Format parse_format(std::string_view name);

struct Options {
  // Elements per absmax block (int8_blockwise, dynamic8, nf4, fp4, int4); unset = the format's
  // default (default_block); 0 or negative is an error. Ignored by int8_absmax,
  // int8_zeropoint and quantile; for storage_* of int8_absmax_row it is the row length.
  std::optional<int64_t> block;
  // nf4/fp4/int4: quantize the fp32 absmax values again (mean removed, dynamic8, blocks of 256).
  bool double_quant = false;
  // dynamic8: the signed map (default) or the unsigned one (input must be >= 0).
  bool signed_map = true;
  // quantile: bits per code, 1..8 (codes bit-packed, first element in the most significant bits).
  int bits = 8;
  // quantile: 0 = exact quantiles by sorting all values; n > 0 = approximate, from an evenly
  // strided sample of at most n values (sorting only the sample).
  int64_t quantile_sample = 0;
};

// Default block: 256 for int8_blockwise and dynamic8 (the 8-bit optimizer states' block in
// bitsandbytes >= 0.44), 64 for nf4/fp4/int4 (bnb quantize_4bit), 0 where unused.
int64_t default_block(Format f);
// Code width in bits (8, or 4 for nf4/fp4/int4, or Options::bits for quantile).
int bits_per_code(Format f, const Options& o = {});
// Number of distinct code values the format can produce (255 for symmetric int8, 15 for int4).
int64_t code_values(Format f, const Options& o = {});

// Double quantization constants (QLoRA DQ as bitsandbytes implements it).
inline constexpr int64_t kDoubleQuantBlock = 256;
inline constexpr float kAbsmaxClamp = 1e-38f;  // bnb clamps absmax before dividing

// The fixed code books, index = code. nf4/fp4 exactly as bitsandbytes' get_4bit_type (fp4
// normalised by 12); the dynamic maps as create_dynamic_map(signed, 7, 8): 256 sorted values,
// signed map from -0.99296875 to 1.0.
const std::array<float, 16>& nf4_code();
const std::array<float, 16>& fp4_code();
// The one owner of the 8-bit dynamic (tree) map: the 8-bit optimizers' states
// (optim/quant8.h) read the same two arrays.
const std::array<float, 256>& dynamic_map(bool is_signed);

// bitsandbytes create_dynamic_map(signed, max_exponent_bits, total_bits) (Dettmers et al.,
// "8-bit Optimizers via Block-wise Quantization", arXiv:2110.02861), reproduced in float32
// exactly as the Python builds it: for each decade i in [0, max_exponent_bits) the midpoints of
// linspace(0.1, 1, k) (k = 2^(i + non_sign_bits - max_exponent_bits) + 1, one more power of two
// when unsigned) scaled by 10^(i - max_exponent_bits + 1), negated copies when signed, then 0 and
// 1.0, padded with zeros to 2^total_bits and sorted. (7, 8) gives dynamic_map(): signed, 127
// negative values (down to -0.99296875), 0, 127 positive up to 1.0; unsigned, 0, 254 values, 1.0.
// Throws snug::Error for bit counts bnb cannot build (total_bits outside 2..8, max_exponent_bits
// outside 1..total_bits-1).
std::vector<float> create_dynamic_map(bool is_signed, int max_exponent_bits = 7,
                                      int total_bits = 8);

struct QuantStats {
  double mse = 0;
  double max_abs_error = 0;
  double snr_db = 0;               // 10 log10(sum x^2 / sum (x - x')^2); +inf when exact
  double codes_used_fraction = 0;  // distinct codes used / code_values(format)
  int64_t bytes = 0;               // actual storage of the Quantized (== storage_bytes)
  double bits_per_param = 0;       // 8 * bytes / numel
};

struct Quantized {
  Format format = Format::int8_absmax;
  std::vector<int64_t> shape;
  int64_t numel = 0;
  int64_t block = 0;  // elements per scale group (row length for int8_absmax_row, numel for
                      // the per-tensor formats, 0 for quantile)
  int bits = 8;
  bool signed_map = true;  // dynamic8 only
  // 8-bit formats: one byte per element (int8 two's complement, or uint8). 4-bit: packed, two
  // per byte, high nibble first, odd length padded. quantile: bit-packed MSB first.
  std::vector<uint8_t> codes;
  // absmax per block/row/tensor (absmax formats), or the scale (int8_zeropoint). Empty when
  // double_quant (then see dq_*).
  std::vector<float> scales;
  std::vector<int32_t> zero_points;  // int8_zeropoint: one
  // Data-dependent code book (quantile only: stored and counted in bytes). The fixed books of
  // nf4/fp4/dynamic8 are shared constants and not stored per tensor.
  std::vector<float> code_book;
  // Double quantization of the absmax values: codes (dynamic map, signed), one fp32 absmax per
  // kDoubleQuantBlock of them, and the fp32 mean that was subtracted.
  bool double_quant = false;
  std::vector<uint8_t> dq_codes;
  std::vector<float> dq_absmax;
  float dq_offset = 0.0f;

  int64_t num_blocks() const;
  // The per-block absmax as used by dequantization (the double-dequantized one under DQ).
  std::vector<float> block_absmax() const;
  // Code (index into the format's code values) of element i, unpacked; int8 formats give the
  // raw byte (two's complement for the signed ones), int4 the nibble.
  uint32_t code_at(int64_t i) const;
  // Bytes held: codes + scales + zero points + code book + dq_codes + dq_absmax + dq_offset.
  int64_t bytes() const;
};

// Quantizes x[0..numel(shape)). Throws snug::Error for an empty input, a zero or negative
// block, NaN/Inf values (naming the first index), bits out of range, negative input to the
// unsigned map, or a scalar shape for int8_absmax_row.
Quantized quantize(const float* x, const std::vector<int64_t>& shape, Format f,
                   const Options& o = {});
Quantized quantize(const std::vector<float>& x, Format f, const Options& o = {});

void dequantize(const Quantized& q, float* out);
std::vector<float> dequantize(const Quantized& q);

// Error of q against the original values x (q.numel of them).
QuantStats compute_stats(const Quantized& q, const float* x);

// Exact storage of a quantized tensor of `numel` elements, without quantizing (also for meta
// planning). codes = bytes of the codes; state = everything else (scales, zero points, stored
// code book, double-quant state). See docs/quantization.md for each formula.
struct StorageBytes {
  int64_t codes = 0;
  int64_t state = 0;
  int64_t total() const { return codes + state; }
};
// For int8_absmax_row pass the row length as o.block (or use the shape overload).
StorageBytes storage_breakdown(Format f, int64_t numel, const Options& o = {});
int64_t storage_bytes(Format f, int64_t numel, const Options& o = {});
int64_t storage_bytes(Format f, int64_t numel, int64_t block, bool double_quant = false);

// Working memory quantize() allocates beyond its input and its Quantized result, for the buffers
// that grow with the input: quantile, a sorted copy of all values (4n bytes; the seed's "the
// order has to be kept somewhere") or of the approximate variant's strided sample
// (4 * ceil(n / ceil(n / S)) bytes); nf4/fp4/int4 with double quantization, the centred absmax
// values (4 * nb); every other format 0 (it codes in place, block by block). Code-search tables
// of at most 2^8 entries are not counted.
int64_t quantize_workspace_bytes(Format f, int64_t numel, const Options& o = {});

// Into caller-owned buffers: the code quantize() runs, writing where the caller says (tensors
// from a MemoryPool, quant/weight_quant.h) instead of into std::vectors, so the values are
// bit-identical to quantize()'s and no untracked copy is made.
//
// Blockwise formats int8_blockwise, nf4, fp4 and int4 in blocks of `block` (> 0): `codes` takes
// storage_breakdown(f, n, {block}).codes bytes (zeroed for the 4-bit formats, whose nibbles are
// merged into bytes), `absmax` ceil(n / block) floats. Throws snug::Error as quantize() does
// (other formats, empty input, bad block, NaN/Inf by index).
void quantize_blockwise_into(const float* x, int64_t n, Format f, int64_t block, uint8_t* codes,
                             float* absmax);
// Double quantization of nb block absmax values, as quantize() with double_quant: writes
// dq_codes (nb bytes) and dq_absmax (ceil(nb / kDoubleQuantBlock) floats) and returns the offset
// (the mean). `absmax` is centred in place: it is the workspace quantize_workspace_bytes counts.
float double_quantize_into(float* absmax, int64_t nb, uint8_t* dq_codes, float* dq_absmax);
// One block's absmax recovered from the double-quantized state (dq_absmax of its group of
// kDoubleQuantBlock): dynamic_map(true)[dq_code] * group_absmax + offset. Out of line, and used by
// Quantized::block_absmax, so that every dequantizer rounds it the same way.
float double_dequant_absmax(uint8_t dq_code, float group_absmax, float offset);

}  // namespace snug::quant

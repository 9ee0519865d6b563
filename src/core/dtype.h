// Element types and their conversions.
//
// f16 and bf16 are stored as uint16_t bit patterns. Conversions from f32 round to nearest, ties
// to even (as PyTorch's .half()/.bfloat16() and the hardware converters do); NaN stays NaN
// (quiet), overflow goes to +-inf (f16: anything >= 65520 in magnitude), f16 subnormals are
// produced and read exactly. The scalar functions are the reference; the bulk `convert` uses
// F16C / AVX-512 when the build has them and is tested against the scalar ones bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace snug {

enum class DType : uint8_t { f32, f16, bf16, i8, u8, i32 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
// Parses "f32"/"float32", "f16"/"float16"/"fp16", "bf16"/"bfloat16", "i8", "u8", "i32".
DType parse_dtype(std::string_view name);

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<int8_t>() {
  return DType::i8;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::u8;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::i32;
}

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bf16: the top 16 bits of an f32, rounded to nearest even.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) {
  return f32_from_bits(static_cast<uint32_t>(h) << 16);
}

// IEEE binary16: 1 sign, 5 exponent, 10 mantissa bits; max 65504; min subnormal 2^-24.
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

// Bulk conversion between any two float dtypes (f32, f16, bf16); n elements. src and dst
// must not overlap unless they are the same pointer and dtype.
void convert(const void* src, DType src_t, void* dst, DType dst_t, size_t n);

}  // namespace snug

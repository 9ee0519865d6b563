#include "core/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace snug {
namespace {
namespace dtype_test {

TEST(DType, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between bf16 1.0 and 1.0078125: ties to even -> 1.0.
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  // 1 + 3*2^-8 is halfway between 1.0078125 (odd) and 1.015625 (even) -> 1.015625.
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.015625f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 1.5f * std::ldexp(1.0f, -8))), 1.0078125f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isinf(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::infinity()))));
  EXPECT_TRUE(std::isinf(bf16_to_f32(f32_to_bf16(3.4028235e38f))));  // rounds up past max
}

TEST(DType, F16SpecialValues) {
  EXPECT_EQ(f16_to_f32(f32_to_f16(65504.0f)), 65504.0f);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);  // below the rounding midpoint
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // midpoint, ties to even -> inf
  EXPECT_EQ(f32_to_f16(-1e6f), 0xfc00);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // half of it: ties to even -> 0
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(std::nanf("")))));
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even (1.0)
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even (up)
}

TEST(DType, F16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << std::hex << h;
  }
}

TEST(DType, BulkConvertMatchesScalarBitForBit) {
  std::mt19937 rng(7);
  std::vector<float> x(1037);
  std::uniform_int_distribution<uint32_t> bits;
  for (size_t i = 0; i < x.size(); ++i) {
    // Mix ordinary values, tiny values (f16 subnormals), huge values and random bit patterns.
    switch (i % 4) {
      case 0:
        x[i] = std::normal_distribution<float>(0, 3)(rng);
        break;
      case 1:
        x[i] = std::normal_distribution<float>(0, 1e-6f)(rng);
        break;
      case 2:
        x[i] = std::normal_distribution<float>(0, 7e4f)(rng);
        break;
      default:
        x[i] = f32_from_bits(bits(rng));
        break;
    }
  }
  for (DType t : {DType::f16, DType::bf16}) {
    std::vector<uint16_t> h(x.size());
    convert(x.data(), DType::f32, h.data(), t, x.size());
    std::vector<float> back(x.size());
    convert(h.data(), t, back.data(), DType::f32, x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t s = t == DType::f16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
      const float sb = t == DType::f16 ? f16_to_f32(s) : bf16_to_f32(s);
      if (std::isnan(x[i])) {
        EXPECT_TRUE(std::isnan(back[i]));
        continue;
      }
      ASSERT_EQ(h[i], s) << dtype_name(t) << " at " << i << " x=" << x[i];
      ASSERT_EQ(f32_bits(back[i]), f32_bits(sb));
    }
  }
}

TEST(DType, Bf16BulkKeepsTheScalarBitsOnSpecials) {
  // The vector paths (AVX-512 / AVX2) against f32_to_bf16 on values where a hardware converter
  // would differ: denormals (vcvtneps2bf16 flushes them), NaN payloads, ties, infinities.
  std::vector<uint32_t> pats = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00400000u,
                                0x00008000u, 0x00018000u, 0x3f808000u, 0x3f818000u, 0x3f80ffffu,
                                0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7f800001u,
                                0xff812345u, 0x7fc00000u, 0x7fffffffu, 0xffc0ffeeu, 0x7f7f8000u};
  for (uint32_t k = 0; k < 1000; ++k) pats.push_back(k * 0x01234567u + 0x00003fffu);
  for (size_t off = 0; off < 17; ++off) {  // every alignment of the 16- and 8-lane loops
    std::vector<float> x(pats.size() - off);
    for (size_t i = 0; i < x.size(); ++i) x[i] = f32_from_bits(pats[i + off]);
    std::vector<uint16_t> h(x.size());
    convert(x.data(), DType::f32, h.data(), DType::bf16, x.size());
    std::vector<float> back(x.size());
    convert(h.data(), DType::bf16, back.data(), DType::f32, x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(h[i], f32_to_bf16(x[i])) << "pattern " << std::hex << pats[i + off];
      ASSERT_EQ(f32_bits(back[i]), static_cast<uint32_t>(h[i]) << 16);
    }
  }
}

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::i32), 4u);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::bf16);
  EXPECT_STREQ(dtype_name(DType::u8), "u8");
}

}  // namespace dtype_test
}  // namespace
}  // namespace snug

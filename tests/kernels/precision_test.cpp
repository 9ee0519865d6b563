// Mixed-precision rounding and packing: the parallel chunked kernels against the scalar
// reference, bit for bit, on sizes that cross chunk and thread boundaries, with values that
// overflow fp16, underflow to its subnormals, and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "kernels/kernels.h"
#include "support/compare.h"
#include "support/random.h"

namespace snug {
namespace {
namespace precision_test {

using test::same_bits;

std::vector<float> tricky_values(int64_t n) {
  std::vector<float> v = test::random_floats(n, 7, -3.0f, 3.0f);
  const float specials[] = {70000.0f,
                            -65520.0f,
                            65504.0f,
                            1e-7f,
                            -3e-8f,
                            1e-40f,
                            0.0f,
                            -0.0f,
                            std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            1.00390625f,
                            3.4e38f};
  for (size_t i = 0; i < std::size(specials) && i * 997 < v.size(); ++i) v[i * 997] = specials[i];
  return v;
}

TEST(Precision, RoundPackUnpackMatchReferenceBitForBit) {
  for (bool fp16 : {true, false}) {
    for (int64_t n : {int64_t{1}, int64_t{4095}, int64_t{4097}, int64_t{70001}}) {
      const std::vector<float> x = tricky_values(n);
      std::vector<float> fast = x, want = x;
      kernels::round_to_half(fast.data(), n, fp16);
      ref::round_to_half(want.data(), n, fp16);
      EXPECT_TRUE(same_bits(fast, want)) << "round fp16=" << fp16 << " n=" << n;

      std::vector<uint16_t> hf(static_cast<size_t>(n)), hr(static_cast<size_t>(n));
      kernels::pack_half(hf.data(), x.data(), n, fp16);
      ref::pack_half(hr.data(), x.data(), n, fp16);
      EXPECT_EQ(hf, hr) << "pack fp16=" << fp16 << " n=" << n;

      std::vector<float> uf(static_cast<size_t>(n)), ur(static_cast<size_t>(n));
      kernels::unpack_half(uf.data(), hf.data(), n, fp16);
      ref::unpack_half(ur.data(), hr.data(), n, fp16);
      EXPECT_TRUE(same_bits(uf, ur)) << "unpack fp16=" << fp16 << " n=" << n;
      EXPECT_TRUE(same_bits(uf, want)) << "unpack(pack(x)) == round(x), fp16=" << fp16;
    }
  }
}

// The fused passes are the two-pass sequences they replace, bit for bit: a copy then a rounding;
// a bias add (add_bias_rows, the Linear kernels' own bias pass) then a rounding.
TEST(Precision, FusedRoundingsEqualTheirTwoPassSequences) {
  for (bool fp16 : {true, false}) {
    for (int64_t n : {int64_t{1}, int64_t{4097}, int64_t{70001}}) {
      const std::vector<float> x = tricky_values(n);
      std::vector<float> want = x, fast(static_cast<size_t>(n)), ref_out(static_cast<size_t>(n));
      kernels::round_to_half(want.data(), n, fp16);
      kernels::copy_round_half(fast.data(), x.data(), n, fp16);
      ref::copy_round_half(ref_out.data(), x.data(), n, fp16);
      EXPECT_TRUE(same_bits(fast, want)) << "copy_round_half fp16=" << fp16 << " n=" << n;
      EXPECT_TRUE(same_bits(ref_out, want)) << "ref copy_round_half fp16=" << fp16 << " n=" << n;
    }
    // Rows wider than one 4096-element piece, and narrower; with a bias and without.
    for (auto [N, C] : {std::pair<int64_t, int64_t>{3, 5000}, {97, 768}, {1, 1}}) {
      const std::vector<float> x = tricky_values(N * C);
      const std::vector<float> b = test::random_floats(C, 11, -2.0f, 2.0f);
      for (bool with_bias : {true, false}) {
        const float* bp = with_bias ? b.data() : nullptr;
        std::vector<float> want = x, fast = x, ref_out = x;
        if (bp) kernels::add_bias_rows(want.data(), bp, N, C);
        kernels::round_to_half(want.data(), N * C, fp16);
        kernels::add_bias_round_half(fast.data(), bp, N, C, fp16);
        ref::add_bias_round_half(ref_out.data(), bp, N, C, fp16);
        EXPECT_TRUE(same_bits(fast, want))
            << "add_bias_round_half fp16=" << fp16 << " " << N << "x" << C << " bias=" << with_bias;
        EXPECT_TRUE(same_bits(ref_out, want)) << "ref add_bias_round_half fp16=" << fp16 << " " << N
                                              << "x" << C << " bias=" << with_bias;
      }
    }
  }
}

TEST(Precision, HalfRangeEdges) {
  std::vector<float> x = {70000.0f, 65504.0f, 1e-8f, 1.0f + 1.0f / 2048.0f, 1.0f + 1.0f / 256.0f};
  std::vector<float> h = x, b = x;
  kernels::round_to_half(h.data(), 5, true);
  kernels::round_to_half(b.data(), 5, false);
  EXPECT_TRUE(std::isinf(h[0]));  // above fp16's max: inf (what overflows the loss scaler)
  EXPECT_EQ(h[1], 65504.0f);
  EXPECT_EQ(h[2], 0.0f);      // below half the smallest fp16 subnormal (2^-24): flushed
  EXPECT_EQ(h[3], 1.0f);      // tie to even at fp16's 10-bit mantissa
  EXPECT_EQ(b[0], 70144.0f);  // bf16 keeps fp32's range, 8-bit mantissa
  EXPECT_EQ(b[4], 1.0f);      // tie to even at bf16's 7-bit mantissa
}

}  // namespace precision_test
}  // namespace
}  // namespace snug

// The CUDA kernels of kernels/cuda/precision.cu against snug::ref: 16-bit rounding and packing
// bit for bit (every 16-bit pattern, random 32-bit patterns with NaN payloads, infinities,
// subnormals and ties), stochastic rounding with the CPU's random bits, the bf16 reductions.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "core/dtype.h"
#include "kernels/kernels.h"
#include "support/gpu.h"
#include "support/random.h"

namespace snug {
namespace {
namespace precision_cudatest {

using test::GpuBuffer;

// Bit patterns, so NaNs compare by payload.
std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

// The special cases of both 16-bit formats, then n random 32-bit patterns (every class of float,
// NaNs with payloads among them), then n values in fp16's range with low mantissa bits that make
// ties and subnormals.
std::vector<float> hard_floats(int64_t n, uint64_t seed) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,          -0.0f,           1.0f,          -1.0f,         inf,
                          -inf,          65504.0f,        65519.99f,     65520.0f,      -65520.0f,
                          6.1035156e-5f, 5.9604645e-8f,   2.9802322e-8f, 2.98e-8f,      1e-45f,
                          -1e-45f,       1.17549435e-38f, 3.4028235e38f, -3.4028235e38f};
  for (uint32_t u : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa5a5a5u, 0xff812345u, 0x3f808000u,
                     0x3f818000u, 0x3f80ffffu, 0x477fefffu, 0x477ff000u, 0x387fe000u, 0x337fffffu,
                     0x33000000u, 0x33000001u, 0x7f7fffffu, 0x7f7f8000u})
    v.push_back(f32_from_bits(u));
  std::mt19937_64 gen(seed);
  for (int64_t i = 0; i < n; ++i) v.push_back(f32_from_bits(static_cast<uint32_t>(gen())));
  for (int64_t i = 0; i < n; ++i) {
    // exponents 2^-30 .. 2^17, any sign and mantissa
    const auto r = static_cast<uint32_t>(gen());
    const uint32_t exp = 97 + (r >> 8) % 48;
    v.push_back(f32_from_bits((r & 0x80000000u) | (exp << 23) |
                              (static_cast<uint32_t>(gen()) & 0x7fffffu)));
  }
  return v;
}

TEST(CudaPrecision, UnpackEverySixteenBitPattern) {
  SNUG_REQUIRE_GPU(gpu);
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  const int64_t n = static_cast<int64_t>(all.size());
  GpuBuffer<uint16_t> src(gpu, all);
  for (bool fp16 : {false, true}) {
    std::vector<float> want(all.size());
    ref::unpack_half(want.data(), all.data(), n, fp16);
    GpuBuffer<float> dst(gpu, n);
    gpu.ops().unpack_half(dst, src, n, fp16);
    EXPECT_EQ(bits(dst.host()), bits(want)) << "fp16=" << fp16;
  }
}

TEST(CudaPrecision, PackAndRoundBitExact) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  const std::vector<float> x = hard_floats(300000, 7);
  const int64_t n = static_cast<int64_t>(x.size());
  GpuBuffer<float> dx(gpu, x);
  for (bool fp16 : {false, true}) {
    SCOPED_TRACE(testing::Message() << "fp16=" << fp16);
    std::vector<uint16_t> packed(x.size());
    ref::pack_half(packed.data(), x.data(), n, fp16);
    GpuBuffer<uint16_t> dp(gpu, n);
    ops.pack_half(dp, dx, n, fp16);
    EXPECT_EQ(dp.host(), packed);

    std::vector<float> rounded = x;
    ref::round_to_half(rounded.data(), n, fp16);
    GpuBuffer<float> dr(gpu, x), dc(gpu, n);
    ops.round_to_half(dr, n, fp16);
    EXPECT_EQ(bits(dr.host()), bits(rounded));
    ops.copy_round_half(dc, dx, n, fp16);
    EXPECT_EQ(bits(dc.host()), bits(rounded));
  }
}

TEST(CudaPrecision, AddBiasRoundHalf) {
  SNUG_REQUIRE_GPU(gpu);
  uint64_t seed = 300;
  for (auto [N, C] : {std::pair<int64_t, int64_t>{1, 1}, {7, 13}, {2048, 768}})
    for (bool fp16 : {false, true})
      for (bool with_bias : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << "N=" << N << " C=" << C << " fp16=" << fp16 << " bias=" << with_bias);
        // Scaled so fp16 sees subnormals and overflow too.
        const auto x0 = test::random_floats(N * C, ++seed, -70000.0f, 70000.0f);
        std::vector<float> x = x0;
        for (size_t i = 0; i < x.size(); i += 3) x[i] *= 1e-9f;
        const auto b = test::random_floats(C, ++seed, -1.0f, 1.0f);
        std::vector<float> want = x;
        ref::add_bias_round_half(want.data(), with_bias ? b.data() : nullptr, N, C, fp16);
        GpuBuffer<float> dx(gpu, x), db(gpu, b);
        gpu.ops().add_bias_round_half(dx, with_bias ? db.get() : nullptr, N, C, fp16);
        EXPECT_EQ(bits(dx.host()), bits(want));
      }
}

TEST(CudaPrecision, StochasticRoundingDrawsTheCpuBits) {
  SNUG_REQUIRE_GPU(gpu);
  const std::vector<float> x = hard_floats(300000, 8);
  const int64_t n = static_cast<int64_t>(x.size());
  GpuBuffer<float> dx(gpu, x);
  for (uint64_t key : {uint64_t{0}, uint64_t{0x0123456789abcdefull}}) {
    std::vector<uint16_t> want(x.size());
    ref::round_bf16_stochastic(want.data(), x.data(), n, key);
    std::vector<uint16_t> fast(x.size());
    kernels::round_bf16_stochastic(fast.data(), x.data(), n, key);
    GpuBuffer<uint16_t> got(gpu, n);
    gpu.ops().round_bf16_stochastic(got, dx, n, key);
    EXPECT_EQ(got.host(), fast) << "key=" << key;
    // ref rounds NaN through f32_to_bf16 and the rest by definition: the same bits.
    EXPECT_EQ(got.host(), want) << "key=" << key;
  }
}

TEST(CudaPrecision, ScaleAndSumSquaresBf16) {
  SNUG_REQUIRE_GPU(gpu);
  const OpTable& ops = gpu.ops();
  // Every bf16 pattern (NaN, inf, subnormals), scaled down, up (to overflow) and by a negative.
  std::vector<uint16_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  // A NaN product's payload is the hardware's (x86 keeps the operand's, or writes 0xffc00000
  // for inf * 0; a GPU writes 0x7fffffff), so a NaN only has to stay a NaN.
  const auto is_nan = [](uint16_t h) { return (h & 0x7fffu) > 0x7f80u; };
  for (float s : {0.37f, -1.7f, 3e30f, 0.0f}) {
    std::vector<uint16_t> want = all;
    ref::scale_bf16(want.data(), s, static_cast<int64_t>(want.size()));
    GpuBuffer<uint16_t> d(gpu, all);
    ops.scale_bf16(d, s, static_cast<int64_t>(all.size()));
    const std::vector<uint16_t> got = d.host();
    int64_t differ = 0;
    for (size_t i = 0; i < all.size(); ++i)
      differ += is_nan(want[i]) ? !is_nan(got[i]) : got[i] != want[i];
    EXPECT_EQ(differ, 0) << "s=" << s;
  }
  for (int64_t n : {1, 7, 1000, 300001, 7000001}) {
    const auto f = test::random_floats(n, 400 + n, -3.0f, 3.0f);
    std::vector<uint16_t> h(f.size());
    for (size_t i = 0; i < f.size(); ++i) h[i] = f32_to_bf16(f[i]);
    const double want = ref::sum_squares_bf16(h.data(), n);
    GpuBuffer<uint16_t> d(gpu, h);
    const double got = ops.sum_squares_bf16(d, n);
    EXPECT_NEAR(got, want, 1e-12 * want) << "n=" << n;
    EXPECT_EQ(ops.sum_squares_bf16(d, n), got) << "n=" << n << ": two runs differ";
  }
  EXPECT_EQ(ops.sum_squares_bf16(nullptr, 0), 0.0);
}

}  // namespace precision_cudatest
}  // namespace
}  // namespace snug

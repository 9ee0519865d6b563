// The bitsandbytes dynamic maps, block-wise quantization, and 8-bit AdamW against an fp32
// reference of the same algorithm.
#include "optim/quant8.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/device.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "optim/adamw8bit.h"

namespace snug {
namespace {
namespace quant8_test {

std::vector<float> randn(int64_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

TEST(OptimQuant8, DynamicMapsHaveTheDocumentedShape) {
  const std::vector<float> s = quant8::create_dynamic_map(true);
  const std::vector<float> u = quant8::create_dynamic_map(false);
  ASSERT_EQ(s.size(), 256u);
  ASSERT_EQ(u.size(), 256u);
  EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
  EXPECT_TRUE(std::is_sorted(u.begin(), u.end()));
  // Signed: 127 negatives down to -0.99296875 (not -1), one 0, 127 positives up to 1.0.
  EXPECT_FLOAT_EQ(s.front(), -0.99296875f);
  EXPECT_EQ(s.back(), 1.0f);
  EXPECT_EQ(std::count_if(s.begin(), s.end(), [](float x) { return x < 0; }), 127);
  EXPECT_EQ(std::count(s.begin(), s.end(), 0.0f), 1);
  EXPECT_FLOAT_EQ(s[128], 5.5e-7f);  // smallest positive
  // Unsigned: 0, 254 values, 1.0.
  EXPECT_EQ(u.front(), 0.0f);
  EXPECT_EQ(u.back(), 1.0f);
  EXPECT_FLOAT_EQ(u[1], 3.25e-7f);
  EXPECT_EQ(std::count(u.begin(), u.end(), 0.0f), 1);
}

TEST(OptimQuant8, DynamicMapsEqualBitsandbytesBitForBit) {
  SafetensorsFile f(std::string(SNUG_TEST_DATA_DIR) + "/optim_golden.safetensors");
  EXPECT_EQ(quant8::create_dynamic_map(true), f.read_f32("map_signed"));
  EXPECT_EQ(quant8::create_dynamic_map(false), f.read_f32("map_unsigned"));
}

// Every quantized element decodes to the code value nearest its normalized value.
void check_round_trip(const std::vector<float>& x, const quant8::Code& code, int64_t block) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(x.size());
  std::vector<float> absmax(static_cast<size_t>(quant8::num_blocks(n, block)));
  std::vector<float> y(x.size());
  quant8::quantize_blockwise(x.data(), n, code, block, q.data(), absmax.data());
  quant8::dequantize_blockwise(q.data(), absmax.data(), n, code, block, y.data());
  for (int64_t b = 0; b < static_cast<int64_t>(absmax.size()); ++b) {
    float m = 0;
    for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i)
      m = std::max(m, std::fabs(x[static_cast<size_t>(i)]));
    ASSERT_EQ(absmax[static_cast<size_t>(b)], m) << "block " << b;
  }
  for (int64_t i = 0; i < n; ++i) {
    const size_t si = static_cast<size_t>(i);
    const float a = absmax[static_cast<size_t>(i / block)];
    const float xn = x[si] / a;
    const float err = std::fabs(code.value(q[si]) - xn);
    for (int c = 0; c < 256; ++c)
      ASSERT_LE(err, std::fabs(code.values()[static_cast<size_t>(c)] - xn) * (1 + 1e-6f) + 1e-12f)
          << "element " << i << " is not at its nearest code";
    ASSERT_NEAR(y[si], code.value(q[si]) * a, 0.0f);
  }
}

TEST(OptimQuant8, BlockwiseRoundTripPicksTheNearestCode) {
  std::vector<float> x = randn(3 * 256 + 77, 0.3f, 7);
  check_round_trip(x, quant8::signed_code(), 256);
  for (float& v : x) v = v * v;  // non-negative, like a second moment
  check_round_trip(x, quant8::unsigned_code(), 256);
  check_round_trip(x, quant8::unsigned_code(), 64);
}

TEST(OptimQuant8, SignFixKeepsSmallNegativesNegative) {
  const quant8::Code& c = quant8::signed_code();
  EXPECT_EQ(c.value(c.nearest(-1e-9f)), 0.0f);
  EXPECT_LT(c.value(c.nearest_signed(-1e-9f)), 0.0f);
  EXPECT_EQ(c.value(c.nearest_signed(1e-9f)), 0.0f);
  EXPECT_EQ(c.value(c.nearest_signed(1.0f)), 1.0f);
}

// The table-started search equals the binary search for every kind of float: both ends and the
// middle of every 16-bit bucket, each midpoint and its neighbours, each code value, the specials,
// and a stride through all 2^32 bit patterns.
TEST(OptimQuant8, FastNearestEqualsTheBinarySearch) {
  for (const quant8::Code* c : {&quant8::signed_code(), &quant8::unsigned_code()}) {
    std::vector<float> xs = {0.0f,
                             -0.0f,
                             std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN(),
                             -std::numeric_limits<float>::quiet_NaN(),
                             std::numeric_limits<float>::denorm_min(),
                             std::numeric_limits<float>::max(),
                             -std::numeric_limits<float>::max()};
    for (uint32_t k = 0; k < 65536; ++k)
      for (uint32_t low : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0xFFFEu, 0xFFFFu})
        xs.push_back(std::bit_cast<float>((k << 16) | low));
    for (int i = 0; i < 256; ++i) {
      const float v = c->value(static_cast<uint8_t>(i));
      xs.push_back(v);
      if (i < 255) {
        const float mid = (v + c->value(static_cast<uint8_t>(i + 1))) / 2.0f;
        for (float m : {mid, std::nextafter(mid, -2.0f), std::nextafter(mid, 2.0f)})
          xs.push_back(m);
      }
    }
    for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 4099)
      xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits)));
    for (float x : xs)
      ASSERT_EQ(c->nearest(x), c->nearest_reference(x))
          << "x = " << x << " (bits 0x" << std::hex << std::bit_cast<uint32_t>(x) << ")";
  }
}

// The fp32 arithmetic of one bitsandbytes 8-bit AdamW element update (see optim/adamw8bit.h).
struct RefAdam {
  float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, lr, wd;
  void step(int64_t t, float g, float& m, float& v, float& p) const {
    const double bc1 = 1.0 - std::pow(double(b1), double(t));
    const double bc2 = std::sqrt(1.0 - std::pow(double(b2), double(t)));
    v = v * b2 + (1.0f - b2) * g * g;
    m = m * b1 + (1.0f - b1) * g;
    p = p + float(-double(lr) * bc2 / bc1) * (m / (std::sqrt(v) + float(bc2) * eps));
    if (wd > 0) p = p * (1.0f - lr * wd);
  }
};

TEST(OptimQuant8, AdamW8bitStepsMatchFp32ReferenceWithinOneCode) {
  Device dev(cpu_backend());
  const int64_t n = 2 * 4096 + 300;  // 8-bit, with a short last block
  Parameter p{"h.0.mlp.c_fc.weight", {}, {}, true, true, {}, Category::gradients, nullptr};
  p.value = Tensor::empty({n}, DType::f32, Category::weights, dev);
  const std::vector<float> w0 = randn(n, 0.5f, 1);
  std::memcpy(p.value.data<float>(), w0.data(), sizeof(float) * size_t(n));
  OptimizerOptions o;
  o.weight_decay = 0.1f;
  AdamW8bit opt({&p}, o, "adamw_bnb_8bit");
  const RefAdam ref{0.9f, 0.999f, 1e-8f, 1e-2f, 0.1f};
  const quant8::Code& c1 = quant8::signed_code();
  const quant8::Code& c2 = quant8::unsigned_code();
  const int64_t nb = quant8::num_blocks(n, 256);
  std::vector<float> m(size_t(n), 0.0f), v(size_t(n), 0.0f), w = w0;
  for (int64_t t = 1; t <= 3; ++t) {
    // Reference input state: the optimizer's dequantized state (zero before the first step).
    if (t > 1) {
      const AdamW8bit::State& s = opt.state_of(&p);
      quant8::dequantize_blockwise(s.m.data<uint8_t>(), s.absmax_m.data<float>(), n, c1, 256,
                                   m.data());
      quant8::dequantize_blockwise(s.v.data<uint8_t>(), s.absmax_v.data<float>(), n, c2, 256,
                                   v.data());
    }
    const std::vector<float> g = randn(n, 0.1f * float(t), 100 + uint32_t(t));
    p.grad_for_accumulation();
    std::memcpy(p.grad.data<float>(), g.data(), sizeof(float) * size_t(n));
    opt.step(ref.lr);
    for (int64_t i = 0; i < n; ++i)
      ref.step(t, g[size_t(i)], m[size_t(i)], v[size_t(i)], w[size_t(i)]);
    const float* got = p.value.data<float>();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(got[i], w[size_t(i)], 1e-6f * std::fabs(w[size_t(i)]) + 1e-7f)
          << "param " << i << " step " << t;
    // New states: absmax is the block's max |state|; each code is within one of the nearest.
    const AdamW8bit::State& s = opt.state_of(&p);
    ASSERT_TRUE(s.q8);
    ASSERT_EQ(s.m.dtype(), DType::u8);
    for (int64_t b = 0; b < nb; ++b) {
      float am = 0, av = 0;
      for (int64_t i = b * 256; i < std::min(n, (b + 1) * 256); ++i) {
        am = std::max(am, std::fabs(m[size_t(i)]));
        av = std::max(av, std::fabs(v[size_t(i)]));
      }
      ASSERT_NEAR(s.absmax_m.data<float>()[b], am, 1e-6f * am);
      ASSERT_NEAR(s.absmax_v.data<float>()[b], av, 1e-6f * av);
      for (int64_t i = b * 256; i < std::min(n, (b + 1) * 256); ++i) {
        const int qm = s.m.data<uint8_t>()[i], qv = s.v.data<uint8_t>()[i];
        ASSERT_LE(std::abs(qm - int(c1.nearest(m[size_t(i)] / am))), 1) << i;
        ASSERT_LE(std::abs(qv - int(c2.nearest(v[size_t(i)] / av))), 1) << i;
      }
    }
    p.free_grad();
  }
}

TEST(OptimQuant8, SmallTensorsAndEmbeddingsKeepFp32States) {
  Device dev(cpu_backend());
  Parameter small{"h.0.ln_1.weight", {}, {}, true, false, {}, Category::gradients, nullptr};
  Parameter big{"h.0.attn.c_attn.weight", {}, {}, true, true, {}, Category::gradients, nullptr};
  Parameter wte{"wte.weight", {}, {}, true, true, {}, Category::gradients, nullptr};
  small.value = Tensor::zeros({4095}, DType::f32, Category::weights, dev);
  big.value = Tensor::zeros({64, 64}, DType::f32, Category::weights, dev);
  wte.value = Tensor::zeros({100, 64}, DType::f32, Category::weights, dev);
  OptimizerOptions o;
  EXPECT_FALSE(AdamW8bit::uses_8bit(small, o));
  EXPECT_TRUE(AdamW8bit::uses_8bit(big, o));
  EXPECT_FALSE(AdamW8bit::uses_8bit(wte, o));
  EXPECT_EQ(AdamW8bit::state_bytes(small, o), 8 * 4095);
  EXPECT_EQ(AdamW8bit::state_bytes(big, o), 2 * 4096 + 2 * 4 * 16);
  o.optim_8bit_embeddings = true;
  EXPECT_TRUE(AdamW8bit::uses_8bit(wte, o));
  EXPECT_EQ(AdamW8bit::state_bytes(wte, o), 2 * 6400 + 2 * 4 * 25);
}

}  // namespace quant8_test
}  // namespace
}  // namespace snug

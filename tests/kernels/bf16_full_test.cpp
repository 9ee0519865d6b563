// --bf16-full kernels (kernels/stochastic_round.h, bf16_full.cpp):
//  - the parallel kernels equal the scalar references bit for bit (AdamW, SGD, stochastic
//    rounding, bf16 sum of squares and scaling), on sizes that cross chunks and threads;
//  - AdamW on bf16 storage stays within bf16 rounding of torch's fp32 formula;
//  - stochastic rounding is unbiased: the mean of many roundings of a value between two bf16
//    neighbours is the value, and each rounding is one of the two neighbours;
//  - updates below half a bf16 ulp still move bf16 weights on average, where round-to-nearest
//    leaves them frozen; likewise AdamW's second moment still decays;
//  - the random bits are a pure function of (key, index): reruns are identical.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/dtype.h"
#include "kernels/kernels.h"
#include "kernels/stochastic_round.h"
#include "support/random.h"

namespace snug {
namespace {
namespace kernels_bf16_full_test {

std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = f32_to_bf16(x[i]);
  return h;
}

TEST(Bf16Full, StochasticRoundingMatchesReferenceBitForBit) {
  const int64_t n = 3 * 8192 + 77;
  std::vector<float> x = test::random_floats(n, 3, -5.0f, 5.0f);
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            3.3895314e38f,  // the largest bf16: may round up to inf
                            -3.3895314e38f,
                            1e-40f,  // subnormal
                            1.0f};
  for (size_t i = 0; i < std::size(specials); ++i) x[i * 101] = specials[i];
  std::vector<uint16_t> fast(n), ref(n);
  kernels::round_bf16_stochastic(fast.data(), x.data(), n, 0x1234);
  ref::round_bf16_stochastic(ref.data(), x.data(), n, 0x1234);
  EXPECT_EQ(fast, ref);
  // Each result is one of the two bf16 neighbours of x (bf16 values and specials: exact).
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[static_cast<size_t>(i)];
    if (std::isnan(v)) {
      EXPECT_TRUE(std::isnan(bf16_to_f32(fast[static_cast<size_t>(i)])));
      continue;
    }
    const uint16_t down = static_cast<uint16_t>(f32_bits(v) >> 16);  // magnitude truncated
    const bool exact = (f32_bits(v) & 0xffffu) == 0;
    const uint16_t got = fast[static_cast<size_t>(i)];
    if (exact)
      EXPECT_EQ(got, down) << v;
    else
      EXPECT_TRUE(got == down || got == down + 1) << v;
  }
  // A pure function of (key, index): the same call gives the same bits, another key others.
  std::vector<uint16_t> again(n), other(n);
  kernels::round_bf16_stochastic(again.data(), x.data(), n, 0x1234);
  kernels::round_bf16_stochastic(other.data(), x.data(), n, 0x1235);
  EXPECT_EQ(again, fast);
  EXPECT_NE(other, fast);
}

TEST(Bf16Full, StochasticRoundingIsUnbiased) {
  // Values between the bf16 neighbours 1 and 1 + 2^-7, at several fractions of the ulp, and
  // negative ones; 2^16 roundings each (different element indices).
  const int64_t n = 1 << 16;
  for (double frac : {0.5, 0.3, 0.03, 0.9}) {
    for (double sign : {1.0, -1.0}) {
      const auto x = static_cast<float>(sign * (1.0 + frac * 0x1p-7));
      const std::vector<float> xs(n, x);
      std::vector<uint16_t> r(n);
      kernels::round_bf16_stochastic(r.data(), xs.data(), n, 99);
      double mean = 0;
      for (uint16_t h : r) mean += bf16_to_f32(h);
      mean /= static_cast<double>(n);
      // The rounding error is ulp * Bernoulli(frac): standard error of the mean
      // ulp * sqrt(frac (1 - frac) / n) <= 2^-7 / 512; allow 5 of them.
      const double se = 0x1p-7 * std::sqrt(frac * (1 - frac) / static_cast<double>(n));
      EXPECT_NEAR(mean, static_cast<double>(x), 5 * se) << "frac " << frac << " sign " << sign;
      // Round to nearest has a bias of up to half an ulp.
      const double nearest = bf16_to_f32(f32_to_bf16(x));
      if (frac != 0.5) {
        EXPECT_GT(std::abs(nearest - x), 20 * se);  // 4x the tolerance above
      }
    }
  }
}

// A ZeRO rank's piece of a tensor (elements [k, n), offset k) rounds with the bits the whole
// tensor's update gives those elements: a sharded --bf16-full step is the unsharded one.
TEST(Bf16Full, APieceUpdatedAtItsOffsetDrawsTheWholeTensorsBits) {
  const int64_t n = 3000, k = 1234;
  const uint64_t key = kernels::rounding_key(9, 2, 4);
  const std::vector<uint16_t> g = to_bf16(test::random_floats(n, 3));
  std::vector<uint16_t> p = to_bf16(test::random_floats(n, 4)), m(n, 0), v(n, 0);
  std::vector<uint16_t> pp = p, mp = m, vp = v;
  kernels::adamw_update_bf16(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.999f, 1e-8f,
                             0.1f, 2, key, 0);
  kernels::adamw_update_bf16(pp.data() + k, g.data() + k, mp.data() + k, vp.data() + k, n - k,
                             1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 2, key, k);
  EXPECT_TRUE(std::equal(p.begin() + k, p.end(), pp.begin() + k));
  EXPECT_TRUE(std::equal(v.begin() + k, v.end(), vp.begin() + k));
  // At offset 0 the same piece draws other bits: some weight rounds the other way.
  std::vector<uint16_t> p0 = to_bf16(test::random_floats(n, 4)), m0(n, 0), v0(n, 0);
  kernels::adamw_update_bf16(p0.data() + k, g.data() + k, m0.data() + k, v0.data() + k, n - k,
                             1e-3f, 0.9f, 0.999f, 1e-8f, 0.1f, 2, key, 0);
  EXPECT_FALSE(std::equal(p.begin() + k, p.end(), p0.begin() + k));
  std::vector<uint16_t> w = to_bf16(test::random_floats(n, 5)), wp = w;
  kernels::sgd_update_bf16(w.data(), g.data(), nullptr, n, 0.05f, 0.0f, 0.0f, false, key, 0);
  kernels::sgd_update_bf16(wp.data() + k, g.data() + k, nullptr, n - k, 0.05f, 0.0f, 0.0f, false,
                           key, k);
  EXPECT_TRUE(std::equal(w.begin() + k, w.end(), wp.begin() + k));
}

TEST(Bf16Full, AdamWAndSgdMatchReferenceBitForBit) {
  const int64_t n = 2 * 8192 + 1001;
  for (float wd : {0.0f, 0.1f}) {
    std::vector<uint16_t> p = to_bf16(test::random_floats(n, 1)), m(n, 0), v(n, 0);
    std::vector<uint16_t> pr = p, mr = m, vr = v;
    for (int t = 1; t <= 3; ++t) {
      const std::vector<uint16_t> g = to_bf16(test::random_floats(n, 10 + t));
      const uint64_t key = kernels::rounding_key(42, t, 7);
      kernels::adamw_update_bf16(p.data(), g.data(), m.data(), v.data(), n, 1e-3f, 0.9f, 0.999f,
                                 1e-8f, wd, t, key, 77 * t);
      ref::adamw_update_bf16(pr.data(), g.data(), mr.data(), vr.data(), n, 1e-3f, 0.9f, 0.999f,
                             1e-8f, wd, t, key, 77 * t);
      ASSERT_EQ(p, pr) << "step " << t;
      ASSERT_EQ(m, mr) << "step " << t;
      ASSERT_EQ(v, vr) << "step " << t;
    }
    for (bool momentum : {false, true}) {
      std::vector<uint16_t> w = to_bf16(test::random_floats(n, 2)), b(n, 0);
      std::vector<uint16_t> wr = w, br = b;
      for (int t = 1; t <= 3; ++t) {
        const std::vector<uint16_t> g = to_bf16(test::random_floats(n, 20 + t));
        const uint64_t key = kernels::rounding_key(1, t, 0);
        kernels::sgd_update_bf16(w.data(), g.data(), momentum ? b.data() : nullptr, n, 0.05f, 0.9f,
                                 wd, t == 1, key, 5 * t);
        ref::sgd_update_bf16(wr.data(), g.data(), momentum ? br.data() : nullptr, n, 0.05f, 0.9f,
                             wd, t == 1, key, 5 * t);
        ASSERT_EQ(w, wr) << "sgd step " << t << " momentum " << momentum;
        ASSERT_EQ(b, br) << "sgd step " << t << " momentum " << momentum;
      }
    }
  }
}

TEST(Bf16Full, AdamWStaysWithinBf16RoundingOfTorchsFormula) {
  // One step from bf16 weights and gradient: the fp32 formula (ref::adamw_update, torch's
  // operation order in double) applied to the same widened values, then compared with the
  // stored bf16 weight: within one bf16 ulp (stochastic rounding picks a neighbour).
  const int64_t n = 4097;
  const std::vector<uint16_t> p0 = to_bf16(test::random_floats(n, 5));
  const std::vector<uint16_t> g = to_bf16(test::random_floats(n, 6));
  std::vector<uint16_t> p = p0, m(n, 0), v(n, 0);
  kernels::adamw_update_bf16(p.data(), g.data(), m.data(), v.data(), n, 1e-2f, 0.9f, 0.999f, 1e-8f,
                             0.1f, 1, kernels::rounding_key(3, 1, 0), 0);
  std::vector<float> pf(n), gf(n), mf(n, 0.0f), vf(n, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    pf[i] = bf16_to_f32(p0[i]);
    gf[i] = bf16_to_f32(g[i]);
  }
  ref::adamw_update(pf.data(), gf.data(), mf.data(), vf.data(), n, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f,
                    1);
  for (int64_t i = 0; i < n; ++i) {
    const float got = bf16_to_f32(p[i]);
    const float ulp = pf[i] == 0.0f ? 1e-30f : std::ldexp(1.0f, std::ilogb(pf[i]) - 7);
    ASSERT_LE(std::abs(got - pf[i]), 1.001f * ulp) << i;
    ASSERT_NEAR(bf16_to_f32(m[i]), mf[i], std::abs(mf[i]) * 0x1p-8f) << i;
    ASSERT_NEAR(bf16_to_f32(v[i]), vf[i], std::abs(vf[i]) * 0x1p-7f) << i;
  }
}

TEST(Bf16Full, TinyUpdatesMoveWeightsOnAverage) {
  // Weights 1.0 (bf16 ulp 2^-7, half an ulp 3.9e-3); a constant gradient makes each AdamW step
  // lr * m_hat / sqrt(v_hat) = lr = 1e-3, a quarter of an ulp. 100 steps: -0.1 in exact
  // arithmetic. Round-to-nearest storage never leaves 1.0; stochastic rounding drifts by -0.1
  // on average.
  const int64_t n = 8192, steps = 100;
  const float lr = 1e-3f;
  std::vector<uint16_t> p(n, f32_to_bf16(1.0f)), m(n, 0), v(n, 0);
  const std::vector<uint16_t> g(n, f32_to_bf16(0.5f));
  std::vector<float> nearest(n, 1.0f), nm(n, 0.0f), nv(n, 0.0f);
  for (int64_t t = 1; t <= steps; ++t) {
    kernels::adamw_update_bf16(p.data(), g.data(), m.data(), v.data(), n, lr, 0.9f, 0.999f, 1e-8f,
                               0.0f, t, kernels::rounding_key(11, t, 0), 0);
    // The same step with fp32 arithmetic and round-to-nearest bf16 weight storage.
    std::vector<float> gf(n, 0.5f);
    kernels::adamw_update(nearest.data(), gf.data(), nm.data(), nv.data(), n, lr, 0.9f, 0.999f,
                          1e-8f, 0.0f, t);
    kernels::round_to_half(nearest.data(), n, false);
  }
  double mean = 0;
  for (uint16_t h : p) mean += bf16_to_f32(h);
  mean /= static_cast<double>(n);
  EXPECT_NEAR(mean, 1.0 - steps * lr, 2e-3);   // 0.9 within 2% of the distance travelled
  for (float w : nearest) ASSERT_EQ(w, 1.0f);  // frozen under round-to-nearest
}

TEST(Bf16Full, SecondMomentStillDecays) {
  // With zero gradients v should decay by beta2 = 0.999 per step, a relative change of 1e-3,
  // below half a bf16 ulp (2^-9 ~ 2e-3): round-to-nearest would keep v forever, stochastic
  // rounding decays it on average (0.999^300 = 0.741).
  const int64_t n = 8192, steps = 300;
  std::vector<uint16_t> p(n, f32_to_bf16(1.0f)), m(n, 0), v(n, f32_to_bf16(1.0f));
  const std::vector<uint16_t> g(n, 0);
  for (int64_t t = 1; t <= steps; ++t)
    kernels::adamw_update_bf16(p.data(), g.data(), m.data(), v.data(), n, 0.0f, 0.9f, 0.999f, 1e-8f,
                               0.0f, t, kernels::rounding_key(5, t, 0), 0);
  double mean = 0;
  for (uint16_t h : v) mean += bf16_to_f32(h);
  mean /= static_cast<double>(n);
  EXPECT_NEAR(mean, std::pow(0.999, steps), 5e-3);
  // lr 0: the weights stay exactly where they were.
  for (uint16_t h : p) ASSERT_EQ(h, f32_to_bf16(1.0f));
}

TEST(Bf16Full, SumSquaresAndScaleMatchReference) {
  const int64_t n = 64 * 1000 + 13;
  const std::vector<uint16_t> x = to_bf16(test::random_floats(n, 8, -2.0f, 2.0f));
  const double fast = kernels::sum_squares_bf16(x.data(), n);
  const double want = ref::sum_squares_bf16(x.data(), n);
  EXPECT_NEAR(fast, want, 1e-12 * want);
  std::vector<uint16_t> a = x, b = x;
  kernels::scale_bf16(a.data(), 0.37f, n);
  ref::scale_bf16(b.data(), 0.37f, n);
  EXPECT_EQ(a, b);
}

}  // namespace kernels_bf16_full_test
}  // namespace
}  // namespace snug

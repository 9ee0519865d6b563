// The long sweep of the fast normal fill (nn/normal_simd.h; the quick checks are in
// normal_fill_test.cpp): 2 * 10^8 values from four seeds equal to the definition bit for bit, and
// what the guard is for: how many of those pairs the lanes' doubles, unguarded, would have
// rounded to another float than libm's (and that the guard sent every one of them to libm).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numbers>
#include <vector>

#include "core/random.h"
#include "nn/init.h"
#include "nn/normal_simd.h"

namespace snug {
namespace {
namespace normal_fill_slowtest {

bool same_float(float a, float b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

TEST(NormalFillSweep, TwoHundredMillionValuesAreTheDefinition) {
  if (detail::kNormalLanes == 0) GTEST_SKIP() << "no SIMD lanes in this build: fill is the loop";
  constexpr int64_t kChunk = int64_t{1} << 20;  // pairs
  constexpr int64_t kChunks = 24;               // per seed: 2.5 * 10^7 pairs
  int64_t pairs = 0, fallbacks = 0, unguarded_wrong = 0, wrong_but_not_guarded = 0,
          doubles_differ = 0;
  std::vector<double> u1(kChunk), u2(kChunk), th(kChunk), lg(kChunk), s(kChunk), c(kChunk);
  const int64_t lanes = detail::kNormalLanes;
  std::vector<float> fast(2 * kChunk), single(2 * lanes);
  for (uint64_t seed : {1ull, 42ull, 0x5eedull, 0xfedcba9876543210ull}) {
    SplitMix64 rng(seed);
    for (int64_t k = 0; k < kChunks; ++k) {
      const uint64_t state = rng.state();
      for (int64_t p = 0; p < kChunk; ++p) {
        u1[p] = rng.uniform();
        u2[p] = rng.uniform();
        th[p] = 2.0 * std::numbers::pi * u2[p];
      }
      fallbacks += detail::fill_normal_pairs(state, kChunk, fast.data(), 0.0f, 1.0f);
      detail::fast_log(u1.data(), lg.data(), kChunk);
      detail::fast_sincos(th.data(), s.data(), c.data(), kChunk);
      for (int64_t p = 0; p < kChunk; ++p) {
        double dc, ds;
        detail::box_muller(u1[p], u2[p], &dc, &ds);
        const float want_c = static_cast<float>(dc), want_s = static_cast<float>(ds);
        ASSERT_TRUE(same_float(fast[2 * p], want_c) && same_float(fast[2 * p + 1], want_s))
            << "seed " << seed << " pair " << pairs + p;
        // The lanes' arithmetic without the guard (the same operations as pairs_lanes).
        const double r = std::sqrt(-2.0 * lg[p]);
        doubles_differ += (r * c[p] != dc) + (r * s[p] != ds);
        const bool wrong = !same_float(static_cast<float>(r * c[p]), want_c) ||
                           !same_float(static_cast<float>(r * s[p]), want_s);
        if (wrong) {
          ++unguarded_wrong;
          // Was it guarded? The pair on every lane: the lanes count their fallbacks.
          const std::vector<double> a(lanes, u1[p]), b(lanes, u2[p]);
          wrong_but_not_guarded += detail::normal_pairs_from_uniforms(
                                       a.data(), b.data(), lanes, single.data(), 0.0f, 1.0f) == 0;
        }
      }
      pairs += kChunk;
    }
  }
  std::printf(
      "[ sweep    ] %lld pairs: %lld (%.2e) guarded; the lanes' doubles differ from libm's in "
      "%lld values, and unguarded %lld pairs would have rounded to another float\n",
      static_cast<long long>(pairs), static_cast<long long>(fallbacks),
      static_cast<double>(fallbacks) / static_cast<double>(pairs),
      static_cast<long long>(doubles_differ), static_cast<long long>(unguarded_wrong));
  EXPECT_GT(fallbacks, 0);
  EXPECT_EQ(wrong_but_not_guarded, 0);
}

}  // namespace normal_fill_slowtest
}  // namespace
}  // namespace snug

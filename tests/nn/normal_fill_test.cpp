// The fast normal fill (nn/normal_simd.h) against its definition (ref::normal_fill, libm): equal
// bit for bit, over long random streams from several seeds and offsets and over inputs chosen
// near the guard; and its log, sin and cos within the error bounds the guard assumes, measured
// against long double. The counts of guarded pairs and the measured maxima are printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numbers>
#include <utility>
#include <vector>

#include "core/random.h"
#include "nn/init.h"
#include "nn/normal_simd.h"

namespace snug {
namespace {
namespace normal_fill_test {

// The index of the first differing float (bit patterns), or -1.
int64_t first_difference(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<int64_t>(i);
  return -1;
}

TEST(NormalFill, FastFillIsTheReferenceBitForBit) {
  // 10^7 values: five seeds, 2 * 10^6 values each from an even and an odd offset; with a mean
  // and std as the models use (0, 0.02) and others.
  int64_t fallbacks = 0, pairs = 0;
  const struct {
    uint64_t seed;
    int64_t offset;
    float mean, std;
  } cases[] = {{0, 0, 0.0f, 1.0f},
               {42, 0, 0.0f, 0.02f},
               {42, 1, 0.0f, 0.02f},
               {7, 12345677, 1.0f, 0.5f},
               {0xdeadbeefcafef00dull, 3, -0.25f, 3.0f}};
  for (const auto& c : cases) {
    const int64_t n = 2000001;  // odd: the last value leaves a spare
    std::vector<float> want(n), got(n);
    NormalGenerator a = NormalGenerator::at(c.seed, c.offset),
                    b = NormalGenerator::at(c.seed, c.offset);
    ref::normal_fill(a, want.data(), n, c.mean, c.std);
    b.fill(got.data(), n, c.mean, c.std);
    EXPECT_EQ(first_difference(want, got), -1) << c.seed << " @" << c.offset;
    // The generators are left in the same place: the spare and the stream.
    for (int k = 0; k < 3; ++k) EXPECT_EQ(a.next(), b.next()) << c.seed << " @" << c.offset;

    // The pair kernel itself, to count its guarded pairs.
    SplitMix64 rng(c.seed);
    rng.skip(2 * static_cast<uint64_t>(c.offset / 2));
    std::vector<float> direct(static_cast<size_t>(n - 1));
    fallbacks += detail::fill_normal_pairs(rng.state(), (n - 1) / 2, direct.data(), c.mean, c.std);
    pairs += (n - 1) / 2;
    NormalGenerator r = NormalGenerator::at(c.seed, 2 * (c.offset / 2));
    std::vector<float> pair_want(direct.size());
    ref::normal_fill(r, pair_want.data(), static_cast<int64_t>(pair_want.size()), c.mean, c.std);
    EXPECT_EQ(first_difference(pair_want, direct), -1) << c.seed;
  }
  std::printf("[ fallback ] %lld of %lld pairs (%.2e) through the definition, %d lanes\n",
              static_cast<long long>(fallbacks), static_cast<long long>(pairs),
              static_cast<double>(fallbacks) / static_cast<double>(pairs), detail::kNormalLanes);
  if (detail::kNormalLanes > 0) {
    EXPECT_GT(fallbacks, 0);  // the guard is exercised
  }
}

TEST(NormalFill, ShortAndOddFillsKeepTheStream) {
  // Lengths around the lane counts and pair boundaries, from odd and even positions: the same
  // values and the same next() afterwards.
  for (int64_t offset : {0, 1, 2, 5})
    for (int64_t n = 0; n <= 40; ++n) {
      NormalGenerator a = NormalGenerator::at(9, offset), b = NormalGenerator::at(9, offset);
      std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
      ref::normal_fill(a, want.data(), n, 0.0f, 0.02f);
      b.fill(got.data(), n, 0.0f, 0.02f);
      EXPECT_EQ(first_difference(want, got), -1) << n << " @" << offset;
      EXPECT_EQ(a.next(), b.next()) << n << " @" << offset;
      EXPECT_EQ(a.next(), b.next()) << n << " @" << offset;
    }
}

// Uniforms of the stream's form, (k + 1) * 2^-53 for k < 2^53.
double uniform_of(uint64_t k) {
  return (static_cast<double>(k) + 1.0) * 0x1p-53;
}

TEST(NormalFill, InputsNearTheGuardAreTheDefinition) {
  // u1 = 1 (r = 0, signed zeros), u1 near 1 (r tiny), u1 tiny (r near its largest, 8.57), u1
  // across the reduction's split at sqrt(1/2); th at and around multiples of pi/2 (a cosine or
  // sine near 0: x far below r), each u1 with each u2.
  std::vector<double> u1s, u2s;
  constexpr uint64_t kTop = (uint64_t{1} << 53) - 1;  // uniform_of(kTop) = 1
  for (uint64_t d = 0; d < 64; ++d) {
    u1s.push_back(uniform_of(kTop - d));
    u1s.push_back(uniform_of(d));
  }
  const uint64_t half_sqrt2 = static_cast<uint64_t>(std::numbers::sqrt2 / 2 * 0x1p53);
  for (uint64_t d = 0; d < 16; ++d) u1s.push_back(uniform_of(half_sqrt2 - 8 + d));
  SplitMix64 rng(3);
  for (int i = 0; i < 32; ++i) u1s.push_back(rng.uniform());
  for (uint64_t quarter = 0; quarter <= 4; ++quarter)
    for (int64_t d = -24; d <= 24; ++d) {
      const int64_t k = static_cast<int64_t>(quarter << 51) + d - 1;
      if (k >= 0 && k <= static_cast<int64_t>(kTop))
        u2s.push_back(uniform_of(static_cast<uint64_t>(k)));
    }
  for (int i = 0; i < 16; ++i) u2s.push_back(rng.uniform());
  std::vector<double> a, b;
  for (double u1 : u1s)
    for (double u2 : u2s) {
      a.push_back(u1);
      b.push_back(u2);
    }
  // Three pairs of the stream (SplitMix64(12345)'s uniforms, found by searching 2 * 10^9 pairs)
  // whose lanes' doubles, unguarded, round to another float than libm's: in each, libm's value is
  // a float midpoint (a tie, to even) and the lanes' is an ulp of double beside it.
  const double found[][2] = {{0x1.12aa848dcbc7cp-2, 0x1.558943e551a82p-1},
                             {0x1.8307cf6305e1fp-1, 0x1.f9e75e9a6306ap-2},
                             {0x1.c4e976a7236b1p-1, 0x1.50afd2d329b23p-1}};
  for (const auto& f : found) {  // at the front: the last pairs (a short tail) skip the lanes
    a.insert(a.begin(), f[0]);
    b.insert(b.begin(), f[1]);
  }
  const int64_t pairs = static_cast<int64_t>(a.size());
  for (const auto& [mean, std] : {std::pair{0.0f, 1.0f}, std::pair{0.0f, 0.02f}}) {
    std::vector<float> got(2 * a.size()), want(2 * a.size());
    const int64_t fallbacks =
        detail::normal_pairs_from_uniforms(a.data(), b.data(), pairs, got.data(), mean, std);
    for (size_t p = 0; p < a.size(); ++p) {
      double c, s;
      detail::box_muller(a[p], b[p], &c, &s);
      want[2 * p] = mean + std * static_cast<float>(c);
      want[2 * p + 1] = mean + std * static_cast<float>(s);
    }
    // The lanes' doubles, unguarded: how many of these pairs they would round to another float.
    std::vector<double> lg(a.size()), th(a.size()), sn(a.size()), cs(a.size());
    for (size_t p = 0; p < a.size(); ++p) th[p] = 2.0 * std::numbers::pi * b[p];
    detail::fast_log(a.data(), lg.data(), pairs);
    detail::fast_sincos(th.data(), sn.data(), cs.data(), pairs);
    int64_t unguarded_wrong = 0;
    for (size_t p = 0; p < a.size(); ++p) {
      const double r = std::sqrt(-2.0 * lg[p]);
      const float x = mean + std * static_cast<float>(r * cs[p]),
                  y = mean + std * static_cast<float>(r * sn[p]);
      unguarded_wrong += std::memcmp(&x, &want[2 * p], sizeof(x)) != 0 ||
                         std::memcmp(&y, &want[2 * p + 1], sizeof(y)) != 0;
    }
    const int64_t i = first_difference(want, got);
    EXPECT_EQ(i, -1) << "pair " << i / 2 << ": u1 " << a[static_cast<size_t>(i / 2)] << " u2 "
                     << b[static_cast<size_t>(i / 2)];
    std::printf(
        "[ fallback ] %lld of %lld chosen pairs through the definition; unguarded, %lld would "
        "have rounded to another float\n",
        static_cast<long long>(fallbacks), static_cast<long long>(pairs),
        static_cast<long long>(unguarded_wrong));
    if (detail::kNormalLanes > 0) {
      EXPECT_GT(fallbacks, 0);
    }
  }
}

TEST(NormalFill, FastLogSinCosWithinTheGuardsBounds) {
  // The guard (nn/normal_simd.h) assumes the lanes' log within 2^-50 relative and sin, cos within
  // 2^-51 absolute. Measured against long double (64-bit significands) on random and chosen
  // arguments.
  std::vector<double> u, th;
  SplitMix64 rng(11);
  for (int i = 0; i < 200000; ++i) u.push_back(rng.uniform());
  constexpr uint64_t kTop = (uint64_t{1} << 53) - 1;
  for (uint64_t d = 1; d < 2000; ++d) u.push_back(uniform_of(kTop - d));
  for (uint64_t d = 0; d < 2000; ++d) u.push_back(uniform_of(d));
  for (int e = 1; e <= 53; ++e) {
    u.push_back(std::ldexp(1.0, -e));
    u.push_back(std::ldexp(std::numbers::sqrt2, -e));
    u.push_back(std::nextafter(std::ldexp(std::numbers::sqrt2, -e), 0.0));
  }
  for (int i = 0; i < 200000; ++i) th.push_back(2.0 * std::numbers::pi * rng.uniform());
  for (int q = 0; q <= 4; ++q)
    for (int d = -200; d <= 200; ++d) {
      const double c = q * (std::numbers::pi / 2) + d * 0x1p-50;
      if (c > 0 && c <= 2.0 * std::numbers::pi) th.push_back(c);
      th.push_back((q * 2 + 1) * (std::numbers::pi / 4) + d * 0x1p-50);  // quadrant edges
    }
  std::vector<double> l(u.size()), s(th.size()), c(th.size());
  detail::fast_log(u.data(), l.data(), static_cast<int64_t>(u.size()));
  detail::fast_sincos(th.data(), s.data(), c.data(), static_cast<int64_t>(th.size()));
  long double log_max = 0, libm_log_max = 0, sin_max = 0, cos_max = 0, libm_sincos_max = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    const long double exact = std::log(static_cast<long double>(u[i]));
    if (exact == 0) {
      EXPECT_EQ(l[i], 0.0) << u[i];
      continue;
    }
    log_max = std::max(log_max, std::fabs((l[i] - exact) / exact));
    libm_log_max = std::max(libm_log_max, std::fabs((std::log(u[i]) - exact) / exact));
  }
  for (size_t i = 0; i < th.size(); ++i) {
    const long double t = th[i];
    sin_max = std::max(sin_max, std::fabs(s[i] - std::sin(t)));
    cos_max = std::max(cos_max, std::fabs(c[i] - std::cos(t)));
    libm_sincos_max = std::max({libm_sincos_max, std::fabs(std::sin(th[i]) - std::sin(t)),
                                std::fabs(std::cos(th[i]) - std::cos(t))});
  }
  std::printf(
      "[ measured ] log %.2Lf (libm %.2Lf) x 2^-53 relative; sin %.2Lf, cos %.2Lf (libm %.2Lf) x "
      "2^-53\n",
      log_max * 0x1p53L, libm_log_max * 0x1p53L, sin_max * 0x1p53L, cos_max * 0x1p53L,
      libm_sincos_max * 0x1p53L);
  EXPECT_LE(log_max, 0x1p-50L);
  EXPECT_LE(libm_log_max, 0x1p-52L);
  EXPECT_LE(sin_max, 0x1p-51L);
  EXPECT_LE(cos_max, 0x1p-51L);
  EXPECT_LE(libm_sincos_max, 0x1p-52L);
}

}  // namespace normal_fill_test
}  // namespace
}  // namespace snug

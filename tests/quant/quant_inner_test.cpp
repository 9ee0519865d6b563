// The blockwise quantizer's inner loops (core/quant_inner.h) against their plain loops
// (quant::ref): the same absmax and the same packed nibbles, bit for bit, on normal blocks and on
// the values where a lane could differ: exactly on a code boundary and one float either side,
// beyond the clamp at +-1, signed zeros, tails shorter than a vector; and the branch-free search
// of a sorted code book giving std::lower_bound's index.
#include "core/quant_inner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/quant_format.h"
#include "core/random.h"
#include "nn/init.h"

namespace snug::quant {
namespace {
namespace quant_inner_test {

// nf4's 15 midpoints, as the quantizer sorts them (the code book is ascending).
std::array<float, 15> nf4_bounds() {
  const std::array<float, 16>& c = nf4_code();
  std::array<float, 15> b{};
  for (int k = 0; k < 15; ++k) b[k] = (c[k] + c[k + 1]) / 2.0f;
  return b;
}

void expect_same_codes(const std::vector<float>& x, float inv, const char* what) {
  const std::array<float, 15> bounds = nf4_bounds();
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> fast(x.size() / 2, 0xAA), plain(x.size() / 2, 0x55);
  fast::encode_block4(x.data(), n, inv, bounds.data(), fast.data());
  ref::encode_block4(x.data(), n, inv, bounds.data(), plain.data());
  EXPECT_EQ(fast, plain) << what << " n=" << n << " inv=" << inv;
  const float a = fast::block_absmax(x.data(), n), b = ref::block_absmax(x.data(), n);
  EXPECT_EQ(std::memcmp(&a, &b, sizeof(a)), 0) << what << " n=" << n << ": " << a << " " << b;
}

TEST(QuantInner, VectorLoopsAreThePlainLoops) {
  // Normal blocks at the models' scale, scaled by their absmax as the quantizer does.
  std::vector<float> x(64 * 1000);
  NormalGenerator(5).fill(x.data(), static_cast<int64_t>(x.size()), 0.0f, 0.02f);
  for (size_t b = 0; b < x.size(); b += 64) {
    const std::vector<float> block(x.begin() + static_cast<std::ptrdiff_t>(b),
                                   x.begin() + static_cast<std::ptrdiff_t>(b + 64));
    const float am = ref::block_absmax(block.data(), 64);
    expect_same_codes(block, 1.0f / std::max(am, kAbsmaxClamp), "normal");
  }
  // Lengths with a tail after the vectors (even, as the packed pairs need).
  for (int64_t n : {2, 14, 16, 18, 30, 32, 34, 62, 66, 128, 254})
    expect_same_codes(std::vector<float>(x.begin(), x.begin() + n), 37.0f, "tail");
}

TEST(QuantInner, BoundariesClampAndZeros) {
  // Each bound itself (a tie goes to the lower code), the floats next to it, +-1 and beyond,
  // signed zeros and tiny values; inv = 1 so the scaled value is the value.
  std::vector<float> v;
  for (float b : nf4_bounds()) {
    v.push_back(b);
    v.push_back(std::nextafter(b, -2.0f));
    v.push_back(std::nextafter(b, 2.0f));
  }
  for (float e : {1.0f, -1.0f, 1.5f, -1.5f, 1e30f, -1e30f, std::nextafter(1.0f, 0.0f),
                  std::nextafter(-1.0f, 0.0f), 0.0f, -0.0f, 1e-45f, -1e-45f, 1e-38f})
    v.push_back(e);
  if (v.size() % 2) v.push_back(0.0f);
  expect_same_codes(v, 1.0f, "boundaries");
  // Rotated, so each value meets every lane and nibble position.
  for (size_t r = 1; r < 32; ++r) {
    std::vector<float> w(v.size());
    for (size_t i = 0; i < v.size(); ++i) w[i] = v[(i + r) % v.size()];
    expect_same_codes(w, 1.0f, "rotated");
  }
  // All zeros (absmax +0, even of -0s), and absmax of an empty range.
  expect_same_codes(std::vector<float>(64, -0.0f), 1.0f / kAbsmaxClamp, "zeros");
  const float empty = fast::block_absmax(nullptr, 0);
  EXPECT_EQ(std::signbit(empty), false);
  EXPECT_EQ(empty, 0.0f);
  // Random bits (finite), the magnitudes spread over the whole float range.
  SplitMix64 rng(8);
  std::vector<float> bits;
  while (bits.size() < 4096) {
    const uint32_t u = static_cast<uint32_t>(rng.next());
    float f;
    std::memcpy(&f, &u, sizeof(f));
    if (std::isfinite(f)) bits.push_back(f);
  }
  expect_same_codes(bits, 1.0f, "random bits");
  expect_same_codes(bits, 1e-20f, "random bits, small inv");
}

TEST(QuantInner, CountBelowIsLowerBound) {
  // The dynamic maps' midpoints (255, as double quantization and dynamic8 search them), on each
  // midpoint, the floats beside it, outside the range and at random.
  SplitMix64 rng(4);
  for (bool is_signed : {true, false}) {
    std::vector<float> code(dynamic_map(is_signed).begin(), dynamic_map(is_signed).end());
    std::sort(code.begin(), code.end());
    std::vector<float> mid;
    for (size_t i = 0; i + 1 < code.size(); ++i) mid.push_back((code[i] + code[i + 1]) / 2.0f);
    std::vector<float> probes = {-2.0f, 2.0f, -1.0f, 1.0f, 0.0f, -0.0f};
    for (float m : mid)
      for (float p : {m, std::nextafter(m, -3.0f), std::nextafter(m, 3.0f)}) probes.push_back(p);
    for (int i = 0; i < 10000; ++i) probes.push_back(static_cast<float>(rng.uniform() * 2.2 - 1.1));
    for (float p : probes)
      ASSERT_EQ(fast::count_below(mid.data(), mid.size(), p),
                ref::count_below(mid.data(), mid.size(), p))
          << p << (is_signed ? " signed" : " unsigned");
  }
  // Every length up to 300, with repeated entries, probed at each entry and between.
  for (size_t n = 0; n <= 300; ++n) {
    std::vector<float> sorted(n);
    for (size_t i = 0; i < n; ++i) sorted[i] = static_cast<float>(i / 3);
    for (float p = -1.0f; p <= static_cast<float>(n / 3) + 1.0f; p += 0.5f)
      ASSERT_EQ(fast::count_below(sorted.data(), n, p), ref::count_below(sorted.data(), n, p))
          << n << " " << p;
  }
}

}  // namespace quant_inner_test
}  // namespace
}  // namespace snug::quant

// The ops that model code uses to touch values without asking which device runs (kernels/ops.inc,
// "Model-level helpers"): add_uniform_noise (NEFTune) and lora_dropout, fast against reference,
// and their defining properties. (Copies are the device's: tests/core/backend_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/random.h"
#include "kernels/kernels.h"
#include "support/random.h"

namespace snug {
namespace {
namespace model_ops_test {

using Vec = std::vector<float>;

TEST(ModelOps, UniformNoiseIsBoundedSeededAndFastEqualsRef) {
  const Vec x = test::random_floats(5000, 2);
  Vec a = x, b = x, c = x;
  const double m = 0.25;
  kernels::add_uniform_noise(a.data(), 5000, 42, m);
  ref::add_uniform_noise(b.data(), 5000, 42, m);
  kernels::add_uniform_noise(c.data(), 5000, 43, m);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Element i gets the i-th draw of SplitMix64(seed), scaled to (-m, m).
  SplitMix64 rng(42);
  double mean = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double noise = (2.0 * rng.uniform() - 1.0) * m;
    EXPECT_EQ(a[i], x[i] + static_cast<float>(noise)) << i;
    EXPECT_LT(std::abs(a[i] - x[i]), m + 1e-6);
    mean += a[i] - x[i];
  }
  EXPECT_LT(std::abs(mean / 5000.0), 0.02);  // zero-mean noise: |mean| ~ m/sqrt(3n) = 0.002
}

TEST(ModelOps, LoraDropoutKeepsTheFractionAndBackwardUsesTheSameMask) {
  const int64_t n = 20000;
  const double p = 0.3;
  const Vec src = test::random_floats(n, 3);
  Vec fast(n), slow(n);
  kernels::lora_dropout(7, p, src.data(), fast.data(), n, false);
  ref::lora_dropout(7, p, src.data(), slow.data(), n, false);
  EXPECT_EQ(fast, slow);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (fast[i] != 0.0f) {
      ++kept;
      EXPECT_FLOAT_EQ(fast[i], src[i] * static_cast<float>(1.0 / (1.0 - p)));
    }
  }
  EXPECT_NEAR(static_cast<double>(kept) / n, 1.0 - p, 0.01);  // binomial sd 0.0032
  // Accumulating (backward): adds exactly the forward's masked values.
  Vec acc(n, 1.0f), acc_ref(n, 1.0f);
  kernels::lora_dropout(7, p, src.data(), acc.data(), n, true);
  ref::lora_dropout(7, p, src.data(), acc_ref.data(), n, true);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(acc[i], 1.0f + fast[i]) << i;
    // The reference's multiply-add may be contracted into one rounding (FMA): an ulp apart.
    EXPECT_NEAR(acc_ref[i], acc[i], 1e-6f * (1.0f + std::abs(acc[i]))) << i;
  }
}

}  // namespace model_ops_test
}  // namespace
}  // namespace snug

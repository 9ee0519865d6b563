// AdamW against a hand-written double-precision transcription of torch.optim.AdamW.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "support/random.h"

namespace snug {
namespace {
namespace adamw_test {

struct AdamState {
  std::vector<double> p, m, v;
};

// torch.optim.AdamW (amsgrad=False), _single_tensor_adamw, in double.
void torch_adamw_step(AdamState& s, const std::vector<float>& g, double lr, double b1, double b2,
                      double eps, double wd, int t) {
  const double bc1 = 1.0 - std::pow(b1, t);
  const double bc2 = 1.0 - std::pow(b2, t);
  for (size_t i = 0; i < s.p.size(); ++i) {
    s.p[i] *= 1.0 - lr * wd;
    s.m[i] = b1 * s.m[i] + (1.0 - b1) * g[i];
    s.v[i] = b2 * s.v[i] + (1.0 - b2) * g[i] * g[i];
    const double denom = std::sqrt(s.v[i]) / std::sqrt(bc2) + eps;
    s.p[i] -= (lr / bc1) * s.m[i] / denom;
  }
}

void run_steps(bool fast, float wd) {
  const int64_t n = 1001;
  const float lr = 1e-2f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f;
  std::vector<float> p = test::random_floats(n, 1), m(n, 0.0f), v(n, 0.0f);
  AdamState want{std::vector<double>(p.begin(), p.end()), std::vector<double>(n, 0.0),
                 std::vector<double>(n, 0.0)};
  for (int t = 1; t <= 4; ++t) {
    std::vector<float> g = test::random_floats(n, 10 + t);
    g[0] = 0.0f;  // zero gradient: only the decay (and the momentum from earlier steps) acts
    if (fast)
      kernels::adamw_update(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, t);
    else
      ref::adamw_update(p.data(), g.data(), m.data(), v.data(), n, lr, b1, b2, eps, wd, t);
    torch_adamw_step(want, g, lr, b1, b2, eps, wd, t);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(p[i], want.p[i], 1e-6 * (1.0 + std::abs(want.p[i])))
          << "step " << t << " i " << i;
      ASSERT_NEAR(m[i], want.m[i], 1e-6 * (1.0 + std::abs(want.m[i])))
          << "step " << t << " i " << i;
      ASSERT_NEAR(v[i], want.v[i], 1e-6 * (1e-3 + std::abs(want.v[i])))
          << "step " << t << " i " << i;
    }
  }
}

TEST(AdamW, FastMatchesTorchFormula) {
  run_steps(true, 0.1f);
}
TEST(AdamW, RefMatchesTorchFormula) {
  run_steps(false, 0.1f);
}
TEST(AdamW, NoWeightDecay) {
  run_steps(true, 0.0f);
}

TEST(AdamW, FirstStepIsSignedLearningRate) {
  // At t = 1 the bias corrections cancel: p -= lr * g / (|g| + eps) ~ lr * sign(g), after the
  // decay p *= 1 - lr * wd.
  std::vector<float> p = {1.0f, -2.0f, 0.5f}, g = {0.3f, -4.0f, 1e-3f}, m(3, 0.0f), v(3, 0.0f);
  kernels::adamw_update(p.data(), g.data(), m.data(), v.data(), 3, 0.1f, 0.9f, 0.999f, 1e-8f, 0.5f,
                        1);
  EXPECT_NEAR(p[0], 1.0 * 0.95 - 0.1, 1e-6);
  EXPECT_NEAR(p[1], -2.0 * 0.95 + 0.1, 1e-6);
  EXPECT_NEAR(p[2], 0.5 * 0.95 - 0.1, 1e-5);
}

}  // namespace adamw_test
}  // namespace
}  // namespace snug

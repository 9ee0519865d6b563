#include "support/gradcheck.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace snug::test {

std::vector<double> numerical_grad(std::vector<float>& x, const std::function<double()>& loss) {
  constexpr float kEps = 1e-3f;
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float orig = x[i];
    const float hi = orig + kEps, lo = orig - kEps;
    x[i] = hi;
    const double lp = loss();
    x[i] = lo;
    const double lm = loss();
    x[i] = orig;
    g[i] = (lp - lm) / (static_cast<double>(hi) - static_cast<double>(lo));
  }
  return g;
}

void expect_grad_close(const std::vector<float>& analytic, const std::vector<double>& numeric,
                       const std::string& what) {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  double scale = 1e-3;
  for (double x : numeric) scale = std::max(scale, std::abs(x));
  size_t tight = 0;
  double worst = 0.0;
  size_t worst_i = 0;
  for (size_t i = 0; i < numeric.size(); ++i) {
    const double err = std::abs(analytic[i] - numeric[i]) / scale;
    if (err <= 1e-3) ++tight;
    if (!(err <= worst)) {
      worst = err;
      worst_i = i;
    }
  }
  EXPECT_LE(worst, 1e-2) << what << ": worst element " << worst_i << " analytic "
                         << analytic[worst_i] << " numeric " << numeric[worst_i] << " (scale "
                         << scale << ")";
  EXPECT_GE(static_cast<double>(tight), 0.9 * static_cast<double>(numeric.size()))
      << what << ": only " << tight << " of " << numeric.size() << " elements within 1e-3";
}

}  // namespace snug::test

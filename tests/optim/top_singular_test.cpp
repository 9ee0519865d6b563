// GaLore's projector: the top singular vectors of matrices built from a known SVD
// G = U diag(s) V^T (orthonormal U, V from Gram-Schmidt in double, distinct s), against U and V.
#include "kernels/top_singular.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace snug {
namespace {
namespace top_singular_test {

// k orthonormal columns of length len, as a (len, k) row-major matrix.
std::vector<double> orthonormal(int64_t len, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> d;
  std::vector<double> q(static_cast<size_t>(len * k));
  for (int64_t j = 0; j < k; ++j) {
    std::vector<double> v(static_cast<size_t>(len));
    for (double& x : v) x = d(rng);
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t i = 0; i < j; ++i) {
        double dot = 0;
        for (int64_t t = 0; t < len; ++t) dot += v[size_t(t)] * q[size_t(t * k + i)];
        for (int64_t t = 0; t < len; ++t) v[size_t(t)] -= dot * q[size_t(t * k + i)];
      }
    double nrm = 0;
    for (double x : v) nrm += x * x;
    nrm = std::sqrt(nrm);
    for (int64_t t = 0; t < len; ++t) q[size_t(t * k + j)] = v[size_t(t)] / nrm;
  }
  return q;
}

// Column j of the (len, k) matrix q, sign-normalized: largest-magnitude component positive.
std::vector<double> column(const std::vector<double>& q, int64_t len, int64_t k, int64_t j) {
  std::vector<double> c(static_cast<size_t>(len));
  for (int64_t t = 0; t < len; ++t) c[size_t(t)] = q[size_t(t * k + j)];
  const auto arg = std::max_element(c.begin(), c.end(),
                                    [](double a, double b) { return std::fabs(a) < std::fabs(b); });
  if (*arg < 0)
    for (double& x : c) x = -x;
  return c;
}

void check(int64_t m, int64_t n, int64_t r, uint32_t seed) {
  const int64_t k = std::min(m, n);
  const std::vector<double> U = orthonormal(m, k, seed), V = orthonormal(n, k, seed + 1);
  std::vector<double> s(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) s[size_t(i)] = 3.0 * std::pow(0.8, double(i));  // distinct
  std::vector<float> G(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t t = 0; t < k; ++t)
        acc += U[size_t(i * k + t)] * s[size_t(t)] * V[size_t(j * k + t)];
      G[size_t(i * n + j)] = static_cast<float>(acc);
    }
  std::vector<float> left(static_cast<size_t>(m * r)), right(static_cast<size_t>(r * n));
  top_left_singular_vectors(G.data(), m, n, r, left.data());
  top_right_singular_vectors(G.data(), m, n, r, right.data());
  for (int64_t j = 0; j < r; ++j) {
    const std::vector<double> u = column(U, m, k, j), v = column(V, n, k, j);
    for (int64_t i = 0; i < m; ++i)
      ASSERT_NEAR(left[size_t(i * r + j)], u[size_t(i)], 2e-5) << "U[" << i << "," << j << "]";
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR(right[size_t(j * n + i)], v[size_t(i)], 2e-5) << "Vh[" << j << "," << i << "]";
  }
}

TEST(TopSingular, RecoversKnownSingularVectorsTallAndWide) {
  check(40, 24, 8, 1);  // tall: GaLore uses the right vectors
  check(24, 40, 8, 3);  // wide: the left ones
  check(64, 64, 16, 5);
  check(96, 3, 1, 7);
}

TEST(TopSingular, FullRankVectorsAreOrthonormal) {
  // All of them, down to singular values the float32 input barely resolves: still a basis.
  const int64_t k = 48;
  std::mt19937 rng(9);
  std::normal_distribution<float> d;
  std::vector<float> G(static_cast<size_t>(k * (k + 5)));
  for (float& x : G) x = d(rng);
  std::vector<float> U(static_cast<size_t>(k * k));
  top_left_singular_vectors(G.data(), k, k + 5, k, U.data());
  for (int64_t a = 0; a < k; ++a)
    for (int64_t b = 0; b < k; ++b) {
      double dot = 0;
      for (int64_t i = 0; i < k; ++i) dot += double(U[size_t(i * k + a)]) * U[size_t(i * k + b)];
      ASSERT_NEAR(dot, a == b ? 1.0 : 0.0, 1e-6) << a << "," << b;
    }
}

TEST(TopSingular, EigenpairsOfADiagonalMatrixComeSortedAndSignNormalized) {
  std::vector<double> A = {2, 0, 0, 0, 5, 0, 0, 0, 1};
  std::vector<double> w(2), Z(6);
  top_eigenpairs_symmetric(A.data(), 3, 2, w.data(), Z.data());
  EXPECT_NEAR(w[0], 5.0, 1e-12);
  EXPECT_NEAR(w[1], 2.0, 1e-12);
  EXPECT_NEAR(Z[1], 1.0, 1e-12);  // e_1, positive
  EXPECT_NEAR(Z[3], 1.0, 1e-12);  // e_0
}

TEST(TopSingular, RankOutsideRangeIsAnError) {
  std::vector<float> G(12, 1.0f), out(12);
  EXPECT_ANY_THROW(top_left_singular_vectors(G.data(), 3, 4, 4, out.data()));
  EXPECT_ANY_THROW(top_right_singular_vectors(G.data(), 3, 4, 0, out.data()));
}

}  // namespace top_singular_test
}  // namespace
}  // namespace snug

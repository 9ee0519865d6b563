// Elementwise closeness checks for float arrays, as gtest assertion results.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <vector>

namespace snug::test {

// The same length and the same bits (NaN payloads and the sign of zero included): "bit for bit".
template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Every |got - want| <= atol + rtol * |want|; on failure reports the worst element.
template <typename A, typename B>
::testing::AssertionResult all_close(const A* got, const B* want, int64_t n, double rtol,
                                     double atol) {
  int64_t worst = -1;
  double worst_excess = 0.0;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = static_cast<double>(got[i]);
    const double w = static_cast<double>(want[i]);
    const double err = std::abs(g - w);
    const double allowed = atol + rtol * std::abs(w);
    if (!(err <= allowed)) {  // also catches NaN
      ++bad;
      const double excess = std::isnan(err) ? INFINITY : err / (allowed > 0 ? allowed : 1e-300);
      if (worst < 0 || excess > worst_excess) {
        worst = i;
        worst_excess = excess;
      }
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  std::ostringstream os;
  os << bad << " of " << n << " elements differ; worst at [" << worst << "]: got "
     << static_cast<double>(got[worst]) << ", want " << static_cast<double>(want[worst])
     << " (rtol " << rtol << ", atol " << atol << ")";
  return ::testing::AssertionFailure() << os.str();
}

template <typename A, typename B>
::testing::AssertionResult all_close(const std::vector<A>& got, const std::vector<B>& want,
                                     double rtol, double atol) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << "size mismatch: " << got.size() << " vs " << want.size();
  return all_close(got.data(), want.data(), static_cast<int64_t>(got.size()), rtol, atol);
}

// Largest |x| of an array (for tolerances relative to an array's scale).
template <typename T>
double max_abs(const std::vector<T>& v) {
  double m = 0.0;
  for (const T& x : v) m = std::max(m, std::abs(static_cast<double>(x)));
  return m;
}

// sum a[i] * b[i] in double (a test's loss L = sum(out * R)).
inline double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// max |got - want| / max |want|: a difference relative to the array's scale.
inline float max_rel(const std::vector<float>& got, const std::vector<float>& want) {
  float md = 0, mr = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    md = std::max(md, std::abs(got[i] - want[i]));
    mr = std::max(mr, std::abs(want[i]));
  }
  return md / mr;
}

// ||a - b|| / ||b|| (L2 over all elements), e.g. the error of a gradient against a reference.
inline double rel_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

}  // namespace snug::test

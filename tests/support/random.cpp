#include "support/random.h"

#include <random>

namespace snug::test {

void fill_uniform(std::vector<float>& v, uint64_t seed, float lo, float hi) {
  // mt19937_64 is fully specified by the standard; the conversion to [0,1) is done by hand
  // (top 24 bits) so the values do not depend on the library's distribution implementation.
  std::mt19937_64 gen(seed);
  for (float& x : v) {
    const float u = static_cast<float>(gen() >> 40) * (1.0f / 16777216.0f);
    x = lo + (hi - lo) * u;
  }
}

std::vector<float> random_floats(int64_t n, uint64_t seed, float lo, float hi) {
  std::vector<float> v(static_cast<size_t>(n));
  fill_uniform(v, seed, lo, hi);
  return v;
}

std::vector<int32_t> random_ints(int64_t n, uint64_t seed, int32_t lo, int32_t hi) {
  std::mt19937_64 gen(seed);
  std::vector<int32_t> v(static_cast<size_t>(n));
  const uint64_t range = static_cast<uint64_t>(static_cast<int64_t>(hi) - lo + 1);
  for (int32_t& x : v) x = static_cast<int32_t>(lo + static_cast<int64_t>(gen() % range));
  return v;
}

}  // namespace snug::test

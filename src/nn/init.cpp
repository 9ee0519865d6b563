#include "nn/init.h"

#include <cmath>
#include <numbers>

#include "nn/normal_simd.h"

namespace snug {

void detail::box_muller(double u1, double u2, double* c, double* s) {
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double th = 2.0 * std::numbers::pi * u2;
  *s = r * std::sin(th);
  *c = r * std::cos(th);
}

double NormalGenerator::next() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = rng_.uniform(), u2 = rng_.uniform();
  double c;
  detail::box_muller(u1, u2, &c, &spare_);
  has_spare_ = true;
  return c;
}

NormalGenerator NormalGenerator::at(uint64_t seed, int64_t k) {
  NormalGenerator g(seed);
  g.rng_.skip(2 * static_cast<uint64_t>(k / 2));
  if (k % 2 != 0) g.next();  // the pair's first half; its second is the spare
  return g;
}

void NormalGenerator::fill(float* out, int64_t n, float mean, float std) {
  int64_t i = 0;
  if (has_spare_ && n > 0) {
    out[0] = mean + std * static_cast<float>(next());
    i = 1;
  }
  // Whole pairs on the fast path; a last odd value through next(), which keeps its pair's second
  // half as the spare (in double, as a later next() returns it).
  const int64_t pairs = (n - i) / 2;
  if (pairs > 0) {
    detail::fill_normal_pairs(rng_.state(), pairs, out + i, mean, std);
    rng_.skip(2 * static_cast<uint64_t>(pairs));
    i += 2 * pairs;
  }
  if (i < n) out[i] = mean + std * static_cast<float>(next());
}

void ref::normal_fill(NormalGenerator& g, float* out, int64_t n, float mean, float std) {
  for (int64_t i = 0; i < n; ++i) out[i] = mean + std * static_cast<float>(g.next());
}

}  // namespace snug

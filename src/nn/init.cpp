#include "nn/init.h"

#include <cmath>
#include <numbers>

namespace snug {

double NormalGenerator::next() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  const double u1 = rng_.uniform(), u2 = rng_.uniform();
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double th = 2.0 * std::numbers::pi * u2;
  spare_ = r * std::sin(th);
  has_spare_ = true;
  return r * std::cos(th);
}

NormalGenerator NormalGenerator::at(uint64_t seed, int64_t k) {
  NormalGenerator g(seed);
  g.rng_.skip(2 * static_cast<uint64_t>(k / 2));
  if (k % 2 != 0) g.next();  // the pair's first half; its second is the spare
  return g;
}

void NormalGenerator::fill(float* out, int64_t n, float mean, float std) {
  for (int64_t i = 0; i < n; ++i) out[i] = mean + std * static_cast<float>(next());
}

}  // namespace snug

// Deterministic normal numbers for weight initialization: SplitMix64 (core/random.h) for the
// stream, Box-Muller for normals, so that a seed means the same model on every platform.
#pragma once

#include <cstdint>

#include "core/random.h"

namespace snug {

class NormalGenerator {
 public:
  explicit NormalGenerator(uint64_t seed) : rng_(seed) {}
  double next();  // standard normal
  // out[i] = mean + std * N(0,1), i < n.
  void fill(float* out, int64_t n, float mean, float std);

 private:
  SplitMix64 rng_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace snug

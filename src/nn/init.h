// Deterministic random numbers for weight initialization and data: splitmix64 for the stream,
// Box-Muller for normals. Chosen over <random> distributions because those are not specified to
// give the same numbers on every standard library; a seed must mean the same model everywhere.
#pragma once

#include <cstdint>

namespace snug {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in (0, 1], 53 bits.
  double uniform() { return (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

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

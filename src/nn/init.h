// Deterministic normal numbers for weight initialization: SplitMix64 (core/random.h) for the
// stream, Box-Muller for normals, so that a seed means the same model on every platform.
#pragma once

#include <cstdint>

#include "core/random.h"

namespace snug {

class NormalGenerator {
 public:
  explicit NormalGenerator(uint64_t seed) : rng_(seed) {}
  // The generator of `seed` positioned at its k-th normal (k >= 0): what NormalGenerator(seed)
  // gives after k calls of next(), without drawing them (each pair of normals takes two
  // uniforms; an odd k recomputes the pair and keeps its second half as the spare). So a long
  // stream can be filled in parallel pieces, bit for bit as one serial fill.
  static NormalGenerator at(uint64_t seed, int64_t k);
  double next();  // standard normal
  // out[i] = mean + std * N(0,1), i < n.
  void fill(float* out, int64_t n, float mean, float std);

 private:
  SplitMix64 rng_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

}  // namespace snug

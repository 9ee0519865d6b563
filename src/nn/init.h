// Deterministic normal numbers for weight initialization: SplitMix64 (core/random.h) for the
// stream, Box-Muller for normals, so that a seed means the same model on every platform.
//
// The definition (detail::box_muller, libm's log, sin and cos in double, each normal rounded to
// float once) is what every seeded model, golden and fixture holds. fill() computes the same
// floats, bit for bit, on a vectorized path (nn/normal_simd.h) that only falls back to the
// definition where its own polynomial log/sincos could round to another float; ref::normal_fill
// is the plain loop it is held to (tests/nn/normal_fill_test.cpp).
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
  // out[i] = mean + std * float(N(0,1)), i < n: the values and the generator's state after it
  // are those of n calls of next() (ref::normal_fill), on the fast path.
  void fill(float* out, int64_t n, float mean, float std);

 private:
  SplitMix64 rng_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

namespace detail {
// One Box-Muller pair from uniforms u1, u2 in (0, 1]: r = sqrt(-2 log u1), th = 2 pi u2,
// *c = r cos th (the pair's first normal), *s = r sin th (its second), with libm's log, sin, cos.
// The definition of the stream's values: next() and the fast path's fallback both call it.
void box_muller(double u1, double u2, double* c, double* s);
}  // namespace detail

namespace ref {
// The plain loop: out[i] = mean + std * static_cast<float>(g.next()), i < n.
void normal_fill(NormalGenerator& g, float* out, int64_t n, float mean, float std);
}  // namespace ref

}  // namespace snug

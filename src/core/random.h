// SplitMix64 (Steele, Lea, Flood 2014): a tiny, fully specified 64-bit generator. snug uses it
// instead of <random> distributions (whose output the standard leaves to the library) so that
// weight initialization, corpora, dummy tokens and shuffles are identical on every platform.
#pragma once

#include <cstdint>

namespace snug {

// The SplitMix64 output function: a bijective mix of one 64-bit word. Word: uint64_t, or a
// GCC vector of them, mixed lane by lane (nn/normal_simd.cpp's streams).
template <class Word>
inline constexpr Word splitmix64_mix_words(Word z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline constexpr uint64_t splitmix64_mix(uint64_t z) {
  return splitmix64_mix_words(z);
}

class SplitMix64 {
 public:
  explicit constexpr SplitMix64(uint64_t seed) : state_(seed) {}
  constexpr uint64_t next() {
    state_ += kGamma;
    return splitmix64_mix(state_);
  }
  // Uniform in [0, n) for n >= 1 (rejection sampling: exact, no modulo bias).
  constexpr uint64_t below(uint64_t n) {
    const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % n);  // a multiple of n
    uint64_t r = next();
    while (r >= limit) r = next();
    return r % n;
  }
  // Jumps ahead `draws` calls of next() (the state advances by a constant per draw).
  constexpr void skip(uint64_t draws) { state_ += draws * kGamma; }
  // The state: the next draw is splitmix64_mix(state() + kGamma), the i-th (from 1) of state() +
  // i * kGamma (a vectorized stream computes its lanes from it: nn/normal_simd.cpp).
  constexpr uint64_t state() const { return state_; }
  static constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;
  // Uniform in (0, 1], 53 bits (never 0, so log() of it is finite).
  constexpr double uniform() { return (static_cast<double>(next() >> 11) + 1.0) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

}  // namespace snug

// Deterministic random test data (same values on every platform run with libstdc++).
#pragma once

#include <cstdint>
#include <vector>

namespace snug::test {

// n floats uniform in [lo, hi), from a generator seeded with seed.
std::vector<float> random_floats(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
// Fills v in place, same stream as random_floats.
void fill_uniform(std::vector<float>& v, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
// n ints uniform in [lo, hi].
std::vector<int32_t> random_ints(int64_t n, uint64_t seed, int32_t lo, int32_t hi);

}  // namespace snug::test

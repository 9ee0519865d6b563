// Test data for the quantization tests: N(0,1) values, optionally with large outliers (as in LLM
// weights and the seed chapter's figure), and the list of every format.
#pragma once

#include <cstdint>
#include <vector>

#include "core/quant_format.h"
#include "nn/init.h"

namespace snug::quant::testdata {

inline std::vector<float> normal(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  NormalGenerator g(seed);
  g.fill(v.data(), n, 0.0f, 1.0f);
  return v;
}

// x40 every 997th value.
inline std::vector<float> with_outliers(int64_t n, uint64_t seed) {
  std::vector<float> v = normal(n, seed);
  for (int64_t i = 17; i < n; i += 997) v[static_cast<size_t>(i)] *= 40.0f;
  return v;
}

inline constexpr Format kAll[] = {Format::int8_absmax,
                                  Format::int8_absmax_row,
                                  Format::int8_zeropoint,
                                  Format::int8_blockwise,
                                  Format::dynamic8,
                                  Format::quantile,
                                  Format::nf4,
                                  Format::fp4,
                                  Format::int4};

}  // namespace snug::quant::testdata

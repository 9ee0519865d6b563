// What the --gemm-path tests share: skipping where oneDNN has no bf16 matmul at all (AVX2-only
// CPUs), and how closely the onednn-bf16 path's losses follow the widen path's.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "kernels/gemm_path.h"

// Skips the test, saying why, where --gemm-path onednn-bf16 would be refused.
#define SKIP_WITHOUT_BF16_MATMUL()                                   \
  do {                                                               \
    if (!::snug::kernels::bf16_matmul_support().available)           \
      GTEST_SKIP() << "no oneDNN bf16 matmul here: "                 \
                   << ::snug::kernels::bf16_matmul_support().reason; \
  } while (0)

namespace snug::test {

// The losses of one run on each path: step 1 sees the same weights, so they differ by the sum
// order of the GEMMs only (1e-3 relative); later steps by what that order moved (5e-3).
inline void expect_paths_train_alike(const std::vector<double>& onednn,
                                     const std::vector<double>& widen) {
  ASSERT_EQ(onednn.size(), widen.size());
  ASSERT_FALSE(widen.empty());
  EXPECT_NEAR(onednn[0], widen[0], 1e-3 * widen[0]);
  for (size_t s = 0; s < widen.size(); ++s)
    EXPECT_NEAR(onednn[s], widen[s], 5e-3 * widen[s]) << "step " << s;
}

}  // namespace snug::test

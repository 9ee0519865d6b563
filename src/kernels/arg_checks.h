// Internal to the kernels: argument checks that more than one kernel makes (fast and reference
// implementations of an op alike), written once so that each throws the same snug::Error.
#pragma once

#include <cstdint>

#include "core/error.h"
#include "kernels/kernels.h"

namespace snug::kernels::detail {

// targets(N): every target below V (a negative one marks an ignored row). `what` names the op.
inline void check_targets(const int32_t* targets, int64_t N, int64_t V, const char* what) {
  for (int64_t n = 0; n < N; ++n)
    SNUG_CHECK(targets[n] < V, what, ": target ", targets[n], " at row ", n,
               " is out of range for a vocabulary of ", V);
}

// The sizes of lm_head_xent (kernels/lm_head_ops.inc) and its targets.
inline void check_lm_head_args(const int32_t* targets, int64_t N, int64_t C, int64_t V,
                               int64_t chunk) {
  SNUG_CHECK(N >= 0 && C >= 0 && V >= 1, "lm_head_xent: bad sizes N=", N, " C=", C, " V=", V);
  SNUG_CHECK(chunk >= 1, "lm_head_xent: chunk must be >= 1, got ", chunk);
  check_targets(targets, N, V, "lm_head_xent");
}

// The GEMM cases that need no library call, for gemm_f32 and gemm_bf16 (`what`): throws for a
// negative size; M or N zero leaves C alone, K zero makes C = beta * C. True when C is done.
inline bool gemm_without_products(const char* what, int64_t M, int64_t N, int64_t K, float beta,
                                  float* C, int64_t ldc) {
  SNUG_CHECK(M >= 0 && N >= 0 && K >= 0, what, ": negative size M=", M, " N=", N, " K=", K);
  if (M == 0 || N == 0) return true;
  if (K == 0) {
    scale_c_for_empty_k(M, N, beta, C, ldc);
    return true;
  }
  return false;
}

}  // namespace snug::kernels::detail

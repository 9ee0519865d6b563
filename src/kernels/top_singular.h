// The top-r singular vectors of a float matrix, as GaLore's projector needs them (Zhao et al.
// 2024, arXiv:2403.03507; jiaweizzhao/GaLore galore_projector.py takes U[:, :r] or Vh[:r, :] of
// torch.linalg.svd). Only the shorter side's vectors are ever wanted, so instead of a full SVD we
// form the Gram matrix of that side in double (G G^T, m x m, for the left vectors; G^T G, n x n,
// for the right ones: its eigenvectors are the singular vectors, its eigenvalues sigma^2) and
// take its r largest eigenpairs with LAPACK's dsyevr (range "I"). In double the squaring costs no
// accuracy that matters here: a vector's error is about 1e-16 * sigma_1^2 / gap.
//
// Conventions (singular vectors are defined up to sign): columns/rows come in descending order
// of singular value, as torch returns them, and each vector's largest-magnitude component is
// made positive (the first such component on ties), so the result is deterministic.
#pragma once

#include <cstdint>

namespace snug {

// G is (m, n) row-major; 1 <= r <= min(m, n).
//   left:  U (m, r) row-major, the top-r left singular vectors as columns;
//   right: Vh (r, n) row-major, the top-r right singular vectors as rows.
void top_left_singular_vectors(const float* G, int64_t m, int64_t n, int64_t r, float* U);
void top_right_singular_vectors(const float* G, int64_t m, int64_t n, int64_t r, float* Vh);

// The r largest eigenpairs of the symmetric (k, k) row-major matrix A (double), eigenvalues
// descending into w (r), eigenvectors as rows of Z (r, k), sign-normalized as above. A is
// overwritten. Throws snug::Error if LAPACK fails.
void top_eigenpairs_symmetric(double* A, int64_t k, int64_t r, double* w, double* Z);

}  // namespace snug

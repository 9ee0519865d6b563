#include "kernels/top_singular.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "core/error.h"

// LAPACK (reference or any implementation), Fortran calling convention with gfortran's hidden
// character-length arguments.
extern "C" void dsyevr_(const char* jobz, const char* range, const char* uplo, const int* n,
                        double* a, const int* lda, const double* vl, const double* vu,
                        const int* il, const int* iu, const double* abstol, int* m, double* w,
                        double* z, const int* ldz, int* isuppz, double* work, const int* lwork,
                        int* iwork, const int* liwork, int* info, size_t, size_t, size_t);

namespace snug {

void top_eigenpairs_symmetric(double* A, int64_t k, int64_t r, double* w, double* Z) {
  SNUG_CHECK(k >= 1 && r >= 1 && r <= k && k < (int64_t{1} << 30),
             "top_eigenpairs_symmetric: need 1 <= r <= k, got r=", r, " k=", k);
  const int n = static_cast<int>(k);
  const int il = static_cast<int>(k - r + 1), iu = n;
  const double vl = 0.0, vu = 0.0, abstol = 0.0;
  int found = 0, info = 0;
  // A is row-major symmetric, so it is its own column-major transpose: pass it as is. dsyevr
  // returns ascending eigenvalues and column-major eigenvectors (column j = vector j).
  std::vector<double> wa(static_cast<size_t>(k));
  std::vector<double> z(static_cast<size_t>(k * r));
  std::vector<int> isuppz(static_cast<size_t>(2 * r));
  int lwork = -1, liwork = -1, iwork_query = 0;
  double work_query = 0.0;
  dsyevr_("V", "I", "U", &n, A, &n, &vl, &vu, &il, &iu, &abstol, &found, wa.data(), z.data(), &n,
          isuppz.data(), &work_query, &lwork, &iwork_query, &liwork, &info, 1, 1, 1);
  SNUG_CHECK(info == 0, "LAPACK dsyevr workspace query failed, info ", info);
  lwork = static_cast<int>(work_query);
  liwork = iwork_query;
  std::vector<double> work(static_cast<size_t>(lwork));
  std::vector<int> iwork(static_cast<size_t>(liwork));
  dsyevr_("V", "I", "U", &n, A, &n, &vl, &vu, &il, &iu, &abstol, &found, wa.data(), z.data(), &n,
          isuppz.data(), work.data(), &lwork, iwork.data(), &liwork, &info, 1, 1, 1);
  SNUG_CHECK(info == 0 && found == static_cast<int>(r), "LAPACK dsyevr failed (info ", info, ", ",
             found, " of ", r, " eigenpairs)");
  for (int64_t j = 0; j < r; ++j) {
    const int64_t src = r - 1 - j;  // descending
    const double* col = z.data() + src * k;
    int64_t arg = 0;
    for (int64_t i = 1; i < k; ++i)
      if (std::fabs(col[i]) > std::fabs(col[arg])) arg = i;
    const double sign = col[arg] < 0.0 ? -1.0 : 1.0;
    w[j] = wa[static_cast<size_t>(src)];
    for (int64_t i = 0; i < k; ++i) Z[j * k + i] = sign * col[i];
  }
}

namespace {

// S (m, m) = G G^T in double for G (m, n) row-major (dot products of rows).
void gram_rows(const float* G, int64_t m, int64_t n, double* S) {
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < m; ++i) {
    const float* a = G + i * n;
    for (int64_t j = 0; j <= i; ++j) {
      const float* b = G + j * n;
      double acc = 0.0;
      for (int64_t t = 0; t < n; ++t) acc += static_cast<double>(a[t]) * static_cast<double>(b[t]);
      S[i * m + j] = acc;
      S[j * m + i] = acc;
    }
  }
}

// S (n, n) = G^T G in double for G (m, n) row-major: row i of S accumulates G[t][i] * G[t][:i]
// over the rows t, reading G row by row.
void gram_cols(const float* G, int64_t m, int64_t n, double* S) {
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < n; ++i) {
    double* s = S + i * n;
    for (int64_t j = 0; j <= i; ++j) s[j] = 0.0;
    for (int64_t t = 0; t < m; ++t) {
      const float* row = G + t * n;
      const double a = static_cast<double>(row[i]);
      for (int64_t j = 0; j <= i; ++j) s[j] += a * static_cast<double>(row[j]);
    }
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j) S[j * n + i] = S[i * n + j];
}

}  // namespace

namespace {

// The top-r eigenvectors, as rows of an (r, k) matrix, of the Gram matrix of G's `left` side
// (k = m, G G^T) or right side (k = n, G^T G). `what` names the caller in the rank error.
std::vector<double> top_gram_eigenvectors(const char* what, const float* G, int64_t m, int64_t n,
                                          int64_t r, bool left) {
  SNUG_CHECK(r >= 1 && r <= std::min(m, n), what, ": rank ", r, " outside [1, ", std::min(m, n),
             "]");
  const int64_t k = left ? m : n;
  std::vector<double> S(static_cast<size_t>(k * k)), w(static_cast<size_t>(r)),
      Z(static_cast<size_t>(r * k));
  if (left)
    gram_rows(G, m, n, S.data());
  else
    gram_cols(G, m, n, S.data());
  top_eigenpairs_symmetric(S.data(), k, r, w.data(), Z.data());
  return Z;
}

}  // namespace

void top_left_singular_vectors(const float* G, int64_t m, int64_t n, int64_t r, float* U) {
  const std::vector<double> Z =
      top_gram_eigenvectors("top_left_singular_vectors", G, m, n, r, true);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < r; ++j)
      U[i * r + j] = static_cast<float>(Z[static_cast<size_t>(j * m + i)]);
}

void top_right_singular_vectors(const float* G, int64_t m, int64_t n, int64_t r, float* Vh) {
  const std::vector<double> Z =
      top_gram_eigenvectors("top_right_singular_vectors", G, m, n, r, false);
  for (int64_t j = 0; j < r * n; ++j) Vh[j] = static_cast<float>(Z[static_cast<size_t>(j)]);
}

}  // namespace snug

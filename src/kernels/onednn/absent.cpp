// The seam of kernels/gemm_path.h in a build without oneDNN (SNUG_ONEDNN=OFF; CMake compiles this
// file instead of the others in kernels/onednn/): fp32 GEMMs on the BLAS that LAPACK already links
// (its CBLAS interface, row-major), and no bf16 matmul, as on a CPU where oneDNN has none: auto
// resolves to widen, onednn-bf16 is refused with the reason, gemm_bf16 throws.
#include <cblas.h>

#include <limits>

#include "core/error.h"
#include "kernels/arg_checks.h"
#include "kernels/gemm_library.h"
#include "kernels/kernels.h"

namespace snug::kernels {

namespace {

constexpr const char* kNoBf16 =
    "no bf16 matmul in this build (built without oneDNN, SNUG_ONEDNN=OFF)";

// CBLAS takes int sizes and, on a bad argument, the reference implementation prints and exits:
// every argument is checked here first, so that a bad call throws like dnnl_sgemm's.
bool fits_int(int64_t v) {
  return v >= 0 && v <= std::numeric_limits<int>::max();
}

}  // namespace

bool built_with_onednn() {
  return false;
}

const char* sgemm_name() {
  return "cblas_sgemm";
}

const char* gemm_library() {
  return "BLAS (cblas_sgemm; built without oneDNN)";
}

Bf16MatmulSupport probe_bf16_matmul() {
  Bf16MatmulSupport s;
  s.reason = kNoBf16;
  return s;
}

std::string onednn_cpu_isa() {
  return "absent";
}

void gemm_f32(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  if (detail::gemm_without_products("gemm_f32", M, N, K, beta, C, ldc)) return;
  SNUG_CHECK(lda >= (transA ? M : K) && ldb >= (transB ? K : N) && ldc >= N && fits_int(M) &&
                 fits_int(N) && fits_int(K) && fits_int(lda) && fits_int(ldb) && fits_int(ldc),
             "gemm_f32: bad sizes for cblas_sgemm (transA=", transA, " transB=", transB, " M=", M,
             " N=", N, " K=", K, " lda=", lda, " ldb=", ldb, " ldc=", ldc, ")");
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A,
              static_cast<int>(lda), B, static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

void gemm_bf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
               const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C,
               int64_t ldc) {
  if (detail::gemm_without_products("gemm_bf16", M, N, K, beta, C, ldc)) return;
  throw Error(snug::detail::concat("gemm_bf16: ", kNoBf16, " for transA=", transA,
                                   " transB=", transB, " M=", M, " N=", N, " K=", K,
                                   "; --gemm-path widen multiplies bf16 in fp32"));
}

}  // namespace snug::kernels

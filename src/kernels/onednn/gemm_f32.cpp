// GEMM through oneDNN's dnnl_sgemm (row-major, OpenMP-threaded; called from inside an OpenMP
// parallel region it runs single-threaded on the calling thread).
#include <oneapi/dnnl/dnnl.h>

#include <string>

#include "core/error.h"
#include "kernels/arg_checks.h"
#include "kernels/gemm_library.h"
#include "kernels/kernels.h"

namespace snug::kernels {

void gemm_f32(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  if (detail::gemm_without_products("gemm_f32", M, N, K, beta, C, ldc)) return;
  const dnnl_status_t st = dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', M, N, K, alpha, A,
                                      lda, B, ldb, beta, C, ldc);
  SNUG_CHECK(st == dnnl_success, "gemm_f32: dnnl_sgemm failed with status ", static_cast<int>(st),
             " (transA=", transA, " transB=", transB, " M=", M, " N=", N, " K=", K, " lda=", lda,
             " ldb=", ldb, " ldc=", ldc, ")");
}

const char* gemm_library() {
  static const std::string name = [] {
    const dnnl_version_t* v = dnnl_version();
    std::string s = "oneDNN ";
    s += std::to_string(v->major);
    s += '.';
    s += std::to_string(v->minor);
    s += '.';
    s += std::to_string(v->patch);
    s += " (dnnl_sgemm)";
    return s;
  }();
  return name.c_str();
}

const char* sgemm_name() {
  return "dnnl_sgemm";
}

}  // namespace snug::kernels

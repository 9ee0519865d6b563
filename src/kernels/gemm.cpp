// What the GEMMs share whichever library multiplies (kernels/onednn/: oneDNN or the BLAS
// fallback): the K == 0 case, which needs no library at all.
#include "kernels/kernels.h"

namespace snug::kernels {

void scale_c_for_empty_k(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

}  // namespace snug::kernels

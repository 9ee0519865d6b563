// Reference GEMM and linear layer: plain loops, double accumulation.
#include <vector>

#include "kernels/kernels.h"

namespace snug::ref {

void gemm_f32(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = transA ? A[k * lda + i] : A[i * lda + k];
        const double b = transB ? B[j * ldb + k] : B[k * ldb + j];
        acc += a * b;
      }
      // beta == 0 means C is write-only (as in BLAS): garbage or NaN there does not propagate.
      const double c = beta == 0.0f ? 0.0 : static_cast<double>(beta) * C[i * ldc + j];
      C[i * ldc + j] = static_cast<float>(alpha * acc + c);
    }
  }
}

void linear_forward(float* out, const float* inp, const float* w, const float* b, int64_t N,
                    int64_t IC, int64_t OC) {
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t o = 0; o < OC; ++o) {
      double acc = b ? b[o] : 0.0;
      for (int64_t i = 0; i < IC; ++i) acc += static_cast<double>(inp[n * IC + i]) * w[i * OC + o];
      out[n * OC + o] = static_cast<float>(acc);
    }
  }
}

void linear_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                     const float* w, int64_t N, int64_t IC, int64_t OC) {
  if (dinp) {
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t i = 0; i < IC; ++i) {
        double acc = 0.0;
        for (int64_t o = 0; o < OC; ++o)
          acc += static_cast<double>(dout[n * OC + o]) * w[i * OC + o];
        dinp[n * IC + i] = static_cast<float>(acc);
      }
    }
  }
  if (dw) {
    for (int64_t i = 0; i < IC; ++i) {
      for (int64_t o = 0; o < OC; ++o) {
        double acc = 0.0;
        for (int64_t n = 0; n < N; ++n)
          acc += static_cast<double>(inp[n * IC + i]) * dout[n * OC + o];
        dw[i * OC + o] += static_cast<float>(acc);
      }
    }
  }
  if (db) {
    for (int64_t o = 0; o < OC; ++o) {
      double acc = 0.0;
      for (int64_t n = 0; n < N; ++n) acc += dout[n * OC + o];
      db[o] += static_cast<float>(acc);
    }
  }
}

}  // namespace snug::ref

// Reference GEMM and linear layer: plain loops, double accumulation (fp32 for bf16 operands).
#include <vector>

#include "core/dtype.h"
#include "kernels/kernels.h"

namespace snug::ref {

namespace {

float widen(float x) {
  return x;
}
float widen(uint16_t x) {
  return bf16_to_f32(x);
}

std::vector<float> widen_bf16(const uint16_t* x, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = widen(x[i]);
  return out;
}

// C(M,N) = alpha * op(A) op(B) + beta * C, every product and sum in Acc, k in order. T is the
// operand type (float, or uint16_t for bf16 bit patterns).
template <typename Acc, typename T>
void gemm_loops(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const T* A,
                int64_t lda, const T* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      Acc acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const Acc a = widen(transA ? A[k * lda + i] : A[i * lda + k]);
        const Acc b = widen(transB ? B[j * ldb + k] : B[k * ldb + j]);
        acc += a * b;
      }
      // beta == 0 means C is write-only (as in BLAS): garbage or NaN there does not propagate.
      const Acc c = beta == 0.0f ? Acc{0} : static_cast<Acc>(beta) * C[i * ldc + j];
      C[i * ldc + j] = static_cast<float>(alpha * acc + c);
    }
  }
}

}  // namespace

// fp32 operands, double accumulation.
void gemm_f32(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  gemm_loops<double>(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
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

// bf16 operands with fp32 accumulation in k order: what a bf16 GEMM unit computes, up to the
// order of the sums (each product of two bf16 values is exact in fp32).
void gemm_bf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
               const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C,
               int64_t ldc) {
  gemm_loops<float>(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void linear_forward_bf16(float* out, const uint16_t* inp, const uint16_t* w, const float* b,
                         int64_t N, int64_t IC, int64_t OC) {
  const std::vector<float> x = widen_bf16(inp, N * IC), wf = widen_bf16(w, IC * OC);
  linear_forward(out, x.data(), wf.data(), b, N, IC, OC);
}

void linear_nt_forward_bf16(float* out, const uint16_t* inp, const uint16_t* w, const float* b,
                            int64_t N, int64_t IC, int64_t OC) {
  const std::vector<float> x = widen_bf16(inp, N * IC), wf = widen_bf16(w, OC * IC);
  linear_nt_forward(out, x.data(), wf.data(), b, N, IC, OC);
}

void linear_nt_backward_bf16(float* dinp, float* dw, float* db, const uint16_t* dout,
                             const uint16_t* inp, const uint16_t* w, int64_t N, int64_t IC,
                             int64_t OC, bool accumulate_dinp) {
  const std::vector<float> d = widen_bf16(dout, N * OC), wf = widen_bf16(w, OC * IC);
  const std::vector<float> x = inp ? widen_bf16(inp, N * IC) : std::vector<float>();
  linear_nt_backward(dinp, dw, db, d.data(), inp ? x.data() : nullptr, wf.data(), N, IC, OC,
                     accumulate_dinp);
}

void linear_backward_bf16(float* dinp, float* dw, float* db, const uint16_t* dout,
                          const uint16_t* inp, const uint16_t* w, int64_t N, int64_t IC,
                          int64_t OC) {
  const std::vector<float> d = widen_bf16(dout, N * OC), x = widen_bf16(inp, N * IC),
                           wf = widen_bf16(w, IC * OC);
  linear_backward(dinp, dw, db, d.data(), x.data(), wf.data(), N, IC, OC);
}

}  // namespace snug::ref

// GEMMs through cuBLASLt, and the Linear ops on top of them (kernels/ops.inc): gemm_f32,
// gemm_bf16, linear_forward/backward (Conv1D layout), linear_nt_forward/backward (nn.Linear
// layout) and their bf16 forms.
//
// fp32 GEMMs compute in plain fp32 (CUBLAS_COMPUTE_32F): no TF32, so a CUDA run matches the CPU's
// within fp32 rounding. snug's matrices are row-major; cuBLASLt is told the column-major
// transpose: C^T(N,M) = op(B)^T op(A)^T, with the operands swapped.
//
// Algorithm choice: cuBLASLt's heuristic, asked once per shape, strides, transposes, dtype,
// pointer alignment (views start at any element, and an algorithm that needs 256-byte aligned
// operands would fault on them) and epilogue, and cached.
//
// The Linear forward adds its bias in cuBLASLt's epilogue (CUBLASLT_EPILOGUE_BIAS: the GEMM's
// fp32 result plus b, one rounding, as the separate add), where a pass of its own over the output
// cost 0.07-0.2 ms a Linear at GPT-2's B=16, T=1024 on an H200 (7 ms of a 335 ms fp32 step). A
// bias that is not 16-byte aligned, or a GEMM with no epilogue algorithm, takes the add kernel.
#include <map>
#include <mutex>
#include <tuple>

#include "core/error.h"
#include "kernels/cuda/context.cuh"

namespace snug {
const OpTable& cuda_op_table();  // op_table.cu
}

namespace snug::cuda {

namespace {

int alignment_of(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int al = 256;
  while (al > 1 && (a % al) != 0) al /= 2;
  return al;
}

using Key = std::tuple<bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, int,
                       int, int, int, bool>;

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool bias = false;  // the bias epilogue is set
};

// cuBLASLt's heuristic for the plan's descriptors: whether it found an algorithm.
bool find_algo(Plan& p, const void* A, const void* B, const float* C) {
  cublasLtMatmulPreference_t pref = nullptr;
  check_cublas(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const auto set = [pref](cublasLtMatmulPreferenceAttributes_t attr, const auto& value,
                          const char* what) {
    check_cublas(cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value), what);
  };
  const size_t ws = lt_workspace_bytes();
  set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, ws, "set workspace");
  const uint32_t al_a = alignment_of(B), al_b = alignment_of(A), al_c = alignment_of(C);
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al_a, "set alignment A");
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al_b, "set alignment B");
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al_c, "set alignment C");
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al_c, "set alignment D");
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt_handle(), p.op, p.a, p.b, p.c, p.c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) return false;
  p.algo = res.algo;
  return true;
}

// Asks for the bias epilogue (fp32 bias) on the plan's descriptor: whether cuBLASLt took it.
bool set_bias_epilogue(Plan& p) {
  const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
  const cudaDataType_t bt = CUDA_R_32F;
  return cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi) ==
             CUBLAS_STATUS_SUCCESS &&
         cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt,
                                        sizeof bt) == CUBLAS_STATUS_SUCCESS;
}

// C(M,N) row-major = alpha op(A) op(B) + beta C (+ bias(N) on every row when bias is given),
// operands of cuda type `ab`. Returns whether the bias was added (true when none was asked).
bool gemm_lt(cudaDataType_t ab, bool transA, bool transB, int64_t M, int64_t N, int64_t K,
             float alpha, const void* A, int64_t lda, const void* B, int64_t ldb, float beta,
             float* C, int64_t ldc, const char* what, const float* bias = nullptr) {
  if (M <= 0 || N <= 0) return true;
  const bool asked = bias != nullptr;
  if (bias && alignment_of(bias) < 16) bias = nullptr;  // the plain GEMM; the caller adds it
  SNUG_CHECK(K >= 0 && lda >= 1 && ldb >= 1 && ldc >= N, what, ": bad arguments (M=", M, " N=", N,
             " K=", K, " lda=", lda, " ldb=", ldb, " ldc=", ldc, ")");
  static std::mutex mu;
  static std::map<Key, Plan> plans;
  const Key key{transA,
                transB,
                M,
                N,
                K,
                lda,
                ldb,
                ldc,
                static_cast<int>(ab),
                alignment_of(A),
                alignment_of(B),
                alignment_of(C),
                bias != nullptr ? 1 : 0,
                beta != 0.0f};
  std::lock_guard<std::mutex> lock(mu);
  auto it = plans.find(key);
  if (it == plans.end()) {
    Plan p;
    check_cublas(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                 "cublasLtMatmulDescCreate");
    // Column-major view: first operand is B (N x K after op), second is A (K x M after op).
    const cublasOperation_t ta = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    check_cublas(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
                 "set TRANSA");
    check_cublas(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
                 "set TRANSB");
    // Stored (column-major) shapes: B is (N,K) col-major with ld ldb when not transposed, else
    // (K,N); A is (K,M) when not transposed, else (M,K).
    check_cublas(cublasLtMatrixLayoutCreate(&p.a, ab, transB ? K : N, transB ? N : K, ldb),
                 "layout B");
    check_cublas(cublasLtMatrixLayoutCreate(&p.b, ab, transA ? M : K, transA ? K : M, lda),
                 "layout A");
    check_cublas(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, N, M, ldc), "layout C");
    p.bias = bias != nullptr && set_bias_epilogue(p) && find_algo(p, A, B, C);
    if (bias != nullptr && !p.bias) {  // no epilogue algorithm: the plain GEMM, bias apart
      const cublasLtEpilogue_t none = CUBLASLT_EPILOGUE_DEFAULT;
      check_cublas(
          cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &none, sizeof none),
          "set epilogue");
    }
    SNUG_CHECK(p.bias || find_algo(p, A, B, C), what, ": cuBLASLt has no algorithm for M=", M,
               " N=", N, " K=", K);
    it = plans.emplace(key, p).first;
  }
  const Plan& p = it->second;
  if (p.bias)
    check_cublas(
        cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
        "set bias pointer");
  check_cublas(cublasLtMatmul(lt_handle(), p.op, &alpha, B, p.a, A, p.b, &beta, C, p.c, C, p.c,
                              &p.algo, lt_workspace(), lt_workspace_bytes(), stream()),
               what);
  return p.bias || !asked;
}

// C rows *= beta (an empty K: the product is zero). beta == 0 writes zeros (C may hold NaN).
__global__ void scale_rows_kernel(float* C, int64_t M, int64_t N, int64_t ldc, float beta) {
  const int64_t total = M * N;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    float& c = C[(i / N) * ldc + i % N];
    c = beta == 0.0f ? 0.0f : c * beta;
  }
}

void empty_k(float* C, int64_t M, int64_t N, int64_t ldc, float beta) {
  if (M <= 0 || N <= 0 || beta == 1.0f) return;
  scale_rows_kernel<<<capped_blocks(M * N, 4096), 256, 0, stream()>>>(C, M, N, ldc, beta);
  check_launch("gemm (empty K)");
}

void gemm_f32(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc) {
  if (K == 0) return empty_k(C, M, N, ldc, beta);
  gemm_lt(CUDA_R_32F, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, "gemm_f32");
}

void gemm_bf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha,
               const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C,
               int64_t ldc) {
  if (K == 0) return empty_k(C, M, N, ldc, beta);
  gemm_lt(CUDA_R_16BF, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, "gemm_bf16");
}

__device__ inline float widen(float x) {
  return x;
}
__device__ inline float widen(uint16_t x) {
  return __uint_as_float(static_cast<uint32_t>(x) << 16);
}

// out(N,OC) += b(OC): rows over grid y, columns over x threads (no 64-bit modulo per element).
__global__ void add_bias_kernel(float* out, const float* b, int64_t N, int64_t OC) {
  for (int64_t r = blockIdx.y; r < N; r += gridDim.y) {
    float* row = out + r * OC;
    for (int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; c < OC;
         c += int64_t{gridDim.x} * blockDim.x)
      row[c] += b[c];
  }
}

// db(OC) += column sums of dout(N,OC) for 16-bit dout, in double, tiled as blocks.cu's fp32
// column sums (bias_grad_rows): block (kSumCols, kSumLanes), thread (x, y) sums column
// blockIdx.x*kSumCols+x over rows y, y+kSumLanes, ...; row y == 0 adds the lanes' partials in
// order. (One thread per column walking all N rows left 768 threads latency-bound: the bias
// gradients of gpt2-124m's --bf16 step on an H200 took longer than its GEMMs.)
constexpr int kSumCols = 8, kSumLanes = 128;
template <typename T>
__global__ void column_sums_kernel(float* db, const T* dout, int64_t N, int64_t OC) {
  __shared__ double part[kSumLanes][kSumCols];
  const int64_t c = blockIdx.x * int64_t{kSumCols} + threadIdx.x;
  double acc = 0.0;
  if (c < OC)
    for (int64_t r = threadIdx.y; r < N; r += kSumLanes) acc += widen(dout[r * OC + c]);
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y != 0 || c >= OC) return;
  double total = 0.0;
  for (int k = 0; k < kSumLanes; ++k) total += part[k][threadIdx.x];
  db[c] = static_cast<float>(db[c] + total);
}

void add_bias(float* out, const float* b, int64_t N, int64_t OC) {
  if (!b || N <= 0 || OC <= 0) return;
  const unsigned cols = blocks_for(OC) < 8 ? blocks_for(OC) : 8u;
  const unsigned rows = N < 65535 ? static_cast<unsigned>(N) : 65535u;
  add_bias_kernel<<<dim3(cols, rows), 256, 0, stream()>>>(out, b, N, OC);
  check_launch("linear bias");
}

template <typename T>
void add_column_sums(float* db, const T* dout, int64_t N, int64_t OC) {
  if (!db || OC <= 0) return;
  if constexpr (sizeof(T) == 4) {
    // fp32: blocks.cu's tiled column sums (bias_grad_rows: the same contract, +=), which spread
    // C columns over many blocks instead of one thread per column walking all N rows.
    return cuda_op_table().bias_grad_rows(db, dout, N, OC);
  }
  column_sums_kernel<T>
      <<<blocks_for(OC, kSumCols), dim3(kSumCols, kSumLanes), 0, stream()>>>(db, dout, N, OC);
  check_launch("linear bias gradient");
}

// The Linear as GEMMs, as kernels/linear_ops.h does it on the host (same calls, same order; the
// forward's bias in the GEMM's epilogue where it can, the same fp32 add).
template <typename T>
void linear_fwd(cudaDataType_t ab, bool nt, float* out, const T* inp, const T* w, const float* b,
                int64_t N, int64_t IC, int64_t OC) {
  if (IC == 0) {
    empty_k(out, N, OC, OC, 0.0f);
    return add_bias(out, b, N, OC);
  }
  if (!gemm_lt(ab, false, nt, N, OC, IC, 1.0f, inp, IC, w, nt ? IC : OC, 0.0f, out, OC,
               "linear forward", b))
    add_bias(out, b, N, OC);
}

template <typename T, typename Gemm>
void linear_bwd(Gemm gemm, bool nt, float* dinp, float* dw, float* db, const T* dout, const T* inp,
                const T* w, int64_t N, int64_t IC, int64_t OC, float dinp_beta) {
  if (dinp) gemm(false, !nt, N, IC, OC, 1.0f, dout, OC, w, nt ? IC : OC, dinp_beta, dinp, IC);
  if (dw) {
    if (nt)
      gemm(true, false, OC, IC, N, 1.0f, dout, OC, inp, IC, 1.0f, dw, IC);
    else
      gemm(true, false, IC, OC, N, 1.0f, inp, IC, dout, OC, 1.0f, dw, OC);
  }
  add_column_sums(db, dout, N, OC);
}

void linear_forward(float* out, const float* inp, const float* w, const float* b, int64_t N,
                    int64_t IC, int64_t OC) {
  linear_fwd(CUDA_R_32F, false, out, inp, w, b, N, IC, OC);
}
void linear_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                     const float* w, int64_t N, int64_t IC, int64_t OC) {
  linear_bwd(gemm_f32, false, dinp, dw, db, dout, inp, w, N, IC, OC, 0.0f);
}
void linear_forward_bf16(float* out, const uint16_t* inp, const uint16_t* w, const float* b,
                         int64_t N, int64_t IC, int64_t OC) {
  linear_fwd(CUDA_R_16BF, false, out, inp, w, b, N, IC, OC);
}
void linear_backward_bf16(float* dinp, float* dw, float* db, const uint16_t* dout,
                          const uint16_t* inp, const uint16_t* w, int64_t N, int64_t IC,
                          int64_t OC) {
  linear_bwd(gemm_bf16, false, dinp, dw, db, dout, inp, w, N, IC, OC, 0.0f);
}
void linear_nt_forward_bf16(float* out, const uint16_t* inp, const uint16_t* w, const float* b,
                            int64_t N, int64_t IC, int64_t OC) {
  linear_fwd(CUDA_R_16BF, true, out, inp, w, b, N, IC, OC);
}
void linear_nt_backward_bf16(float* dinp, float* dw, float* db, const uint16_t* dout,
                             const uint16_t* inp, const uint16_t* w, int64_t N, int64_t IC,
                             int64_t OC, bool accumulate_dinp) {
  linear_bwd(gemm_bf16, true, dinp, dw, db, dout, inp, w, N, IC, OC, accumulate_dinp ? 1.0f : 0.0f);
}
void linear_nt_forward(float* out, const float* inp, const float* w, const float* b, int64_t N,
                       int64_t IC, int64_t OC) {
  linear_fwd(CUDA_R_32F, true, out, inp, w, b, N, IC, OC);
}
void linear_nt_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, int64_t N, int64_t IC, int64_t OC, bool accumulate_dinp) {
  linear_bwd(gemm_f32, true, dinp, dw, db, dout, inp, w, N, IC, OC, accumulate_dinp ? 1.0f : 0.0f);
}

}  // namespace

void register_gemm(OpTable& t) {
  t.gemm_f32 = &gemm_f32;
  t.gemm_bf16 = &gemm_bf16;
  t.linear_forward = &linear_forward;
  t.linear_backward = &linear_backward;
  t.linear_forward_bf16 = &linear_forward_bf16;
  t.linear_backward_bf16 = &linear_backward_bf16;
  t.linear_nt_forward = &linear_nt_forward;
  t.linear_nt_backward = &linear_nt_backward;
  t.linear_nt_forward_bf16 = &linear_nt_forward_bf16;
  t.linear_nt_backward_bf16 = &linear_nt_backward_bf16;
}

}  // namespace snug::cuda

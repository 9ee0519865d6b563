// The GPT-2 blocks of kernels/ops.inc that are not GEMMs: embedding, layernorm, GELU (tanh and
// erf), tanh, row bias and its gradient, dropout, and the AdamW step.
//
// Determinism: no float atomics. Scatter-adds and column sums are owned: embedding_backward's
// dwte row r, column c is updated by one thread, which walks the tokens in order (the threads of
// a column are split by token id modulo kVocabBuckets, so a repeated token always meets the same
// thread), giving the reference's bits exactly; the column sums (layernorm's dw/db,
// bias_grad_rows) sum fixed row slices in double, then the slices in order.
#include <cmath>

#include "kernels/cuda/context.cuh"
#include "kernels/cuda/reduce.cuh"
#include "kernels/dropout_mask.h"

namespace snug::cuda {

namespace {

unsigned grid_for(int64_t n) {
  const unsigned b = blocks_for(n);
  return b > 8192 ? 8192 : b;
}

#define SNUG_GRID_STRIDE(i, n)                                              \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); \
       i += int64_t{gridDim.x} * blockDim.x)

// ---- embedding ------------------------------------------------------------------------------

__global__ void embedding_forward_kernel(float* out, const int32_t* idx, const float* wte,
                                         const float* wpe, int64_t T, int64_t C, int64_t n) {
  SNUG_GRID_STRIDE(i, n) {
    const int64_t bt = i / C, c = i % C;
    const float te = wte[static_cast<int64_t>(idx[bt]) * C + c];
    out[i] = wpe ? te + wpe[(bt % T) * C + c] : te;
  }
}

constexpr int kVocabBuckets = 64;
constexpr int kTokenTile = 1024;

// grid (ceil(C/128), kVocabBuckets), 128 threads: column c, tokens whose id % kVocabBuckets is
// blockIdx.y, in token order (the token ids pass through shared memory a tile at a time).
__global__ void embedding_dwte_kernel(float* dwte, const float* dout, const int32_t* idx,
                                      int64_t BT, int64_t C) {
  __shared__ int32_t tile[kTokenTile];
  const int64_t c = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const auto bucket = static_cast<uint32_t>(blockIdx.y);
  for (int64_t base = 0; base < BT; base += kTokenTile) {
    const int64_t len = BT - base < kTokenTile ? BT - base : kTokenTile;
    __syncthreads();
    for (int64_t k = threadIdx.x; k < len; k += blockDim.x) tile[k] = idx[base + k];
    __syncthreads();
    if (c >= C) continue;
    for (int64_t k = 0; k < len; ++k) {
      const auto tok = static_cast<uint32_t>(tile[k]);
      if (tok % kVocabBuckets == bucket) dwte[int64_t{tok} * C + c] += dout[(base + k) * C + c];
    }
  }
}

// One thread per (t, c): the batch in order.
__global__ void embedding_dwpe_kernel(float* dwpe, const float* dout, int64_t B, int64_t T,
                                      int64_t C) {
  SNUG_GRID_STRIDE(i, T * C) {
    float g = dwpe[i];
    for (int64_t b = 0; b < B; ++b) g += dout[b * T * C + i];
    dwpe[i] = g;
  }
}

void embedding_forward(float* out, const int32_t* idx, const float* wte, const float* wpe,
                       int64_t B, int64_t T, int64_t C) {
  const int64_t n = B * T * C;
  if (n <= 0) return;
  embedding_forward_kernel<<<grid_for(n), 256, 0, stream()>>>(out, idx, wte, wpe, T, C, n);
  check_launch("embedding_forward");
}

void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* idx, int64_t B,
                        int64_t T, int64_t C) {
  if (B * T * C <= 0) return;
  if (dwte) {
    const dim3 grid(blocks_for(C, 128), kVocabBuckets);
    embedding_dwte_kernel<<<grid, 128, 0, stream()>>>(dwte, dout, idx, B * T, C);
    check_launch("embedding_backward (dwte)");
  }
  if (dwpe) {
    embedding_dwpe_kernel<<<grid_for(T * C), 256, 0, stream()>>>(dwpe, dout, B, T, C);
    check_launch("embedding_backward (dwpe)");
  }
}

// ---- column sums (layernorm's dw/db, bias_grad_rows) ----------------------------------------

// Block (kSumCols, kSumLanes), grid ceil(C/kSumCols): thread (x, y) sums column
// blockIdx.x*kSumCols+x over rows y, y+kSumLanes, ... in double; row y == 0 then adds the lanes'
// partials in order. Narrow column tiles (a warp reads 8 columns of 4 rows: whole 32-byte
// sectors) spread C = 768 over 96 blocks. With a layernorm (x, mean, rstd): dw[c] += sum
// dy*xhat; db[c] += sum dy; each skipped when null.
constexpr int kSumCols = 8, kSumLanes = 128;

__global__ void column_sums_kernel(float* dw, float* db, const float* dy, const float* x,
                                   const float* mean, const float* rstd, int64_t N, int64_t C) {
  __shared__ double sw[kSumLanes][kSumCols], sb[kSumLanes][kSumCols];
  const int64_t c = blockIdx.x * int64_t{kSumCols} + threadIdx.x;
  double aw = 0.0, ab = 0.0;
  if (c < C)
    for (int64_t r = threadIdx.y; r < N; r += kSumLanes) {
      const double d = dy[r * C + c];
      ab += d;
      if (dw) aw += d * ((x[r * C + c] - static_cast<double>(mean[r])) * rstd[r]);
    }
  sw[threadIdx.y][threadIdx.x] = aw;
  sb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y != 0 || c >= C) return;
  double tw = 0.0, tb = 0.0;
  for (int k = 0; k < kSumLanes; ++k) {
    tw += sw[k][threadIdx.x];
    tb += sb[k][threadIdx.x];
  }
  if (dw) dw[c] = static_cast<float>(dw[c] + tw);
  if (db) db[c] = static_cast<float>(db[c] + tb);
}

void column_sums(float* dw, float* db, const float* dy, const float* x, const float* mean,
                 const float* rstd, int64_t N, int64_t C, const char* what) {
  if ((!dw && !db) || C <= 0) return;
  column_sums_kernel<<<blocks_for(C, kSumCols), dim3(kSumCols, kSumLanes), 0, stream()>>>(
      dw, db, dy, x, mean, rstd, N, C);
  check_launch(what);
}

// ---- layernorm ------------------------------------------------------------------------------

int row_threads(int64_t C) {
  return C >= 2048 ? 1024 : (C >= 256 ? 256 : 64);
}

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp,
                                         const float* w, const float* b, int64_t C, float eps) {
  const int64_t n = blockIdx.x;
  const float* x = inp + n * C;
  double s = 0.0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) s += x[c];
  const double m = block_sum(s) / static_cast<double>(C);
  double v = 0.0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) v += (x[c] - m) * (x[c] - m);
  const double var = block_sum(v) / static_cast<double>(C);
  const double r = 1.0 / sqrt(var + eps);
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x)
    out[n * C + c] = static_cast<float>((x[c] - m) * r * w[c] + b[c]);
  if (threadIdx.x == 0) {
    mean[n] = static_cast<float>(m);
    rstd[n] = static_cast<float>(r);
  }
}

// dinp row n += rstd * (dnorm - mean(dnorm) - xhat * mean(dnorm * xhat)), dnorm = dout * w.
__global__ void layernorm_dinp_kernel(float* dinp, const float* dout, const float* inp,
                                      const float* w, const float* mean, const float* rstd,
                                      int64_t C) {
  const int64_t n = blockIdx.x;
  const float* x = inp + n * C;
  const float* d = dout + n * C;
  const double m = mean[n], s = rstd[n];
  double a = 0.0, ax = 0.0;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const double dnorm = static_cast<double>(d[c]) * w[c];
    a += dnorm;
    ax += dnorm * ((x[c] - m) * s);
  }
  const double mean_dnorm = block_sum(a) / static_cast<double>(C);
  const double mean_dnorm_xhat = block_sum(ax) / static_cast<double>(C);
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    const double xhat = (x[c] - m) * s;
    const double dnorm = static_cast<double>(d[c]) * w[c];
    dinp[n * C + c] += static_cast<float>(s * (dnorm - mean_dnorm - xhat * mean_dnorm_xhat));
  }
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                       const float* b, int64_t N, int64_t C, float eps) {
  if (N <= 0 || C <= 0) return;
  layernorm_forward_kernel<<<static_cast<unsigned>(N), row_threads(C), 0, stream()>>>(
      out, mean, rstd, inp, w, b, C, eps);
  check_launch("layernorm_forward");
}

void layernorm_backward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                        const float* w, const float* mean, const float* rstd, int64_t N,
                        int64_t C) {
  if (N <= 0 || C <= 0) return;
  if (dinp) {
    layernorm_dinp_kernel<<<static_cast<unsigned>(N), row_threads(C), 0, stream()>>>(
        dinp, dout, inp, w, mean, rstd, C);
    check_launch("layernorm_backward (dinp)");
  }
  column_sums(dw, db, dout, inp, mean, rstd, N, C, "layernorm_backward (dw, db)");
}

// ---- activations (evaluated in double, as the reference) ------------------------------------

constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kCubic = 0.044715;
constexpr double kInvSqrt2 = 0.70710678118654752440;    // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/sqrt(2 pi)

__global__ void gelu_forward_kernel(float* out, const float* inp, int64_t n) {
  SNUG_GRID_STRIDE(i, n) {
    const double x = inp[i];
    out[i] = static_cast<float>(0.5 * x * (1.0 + tanh(kSqrt2OverPi * (x + kCubic * x * x * x))));
  }
}

__global__ void gelu_backward_kernel(float* dinp, const float* inp, const float* dout, int64_t n) {
  SNUG_GRID_STRIDE(i, n) {
    const double x = inp[i];
    const double th = tanh(kSqrt2OverPi * (x + kCubic * x * x * x));
    const double du = kSqrt2OverPi * (1.0 + 3.0 * kCubic * x * x);
    const double grad = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
    dinp[i] = static_cast<float>(grad * dout[i]);
  }
}

__global__ void gelu_erf_forward_kernel(float* out, const float* inp, int64_t n) {
  SNUG_GRID_STRIDE(i, n) {
    const double x = inp[i];
    out[i] = static_cast<float>(0.5 * x * (1.0 + erf(x * kInvSqrt2)));
  }
}

__global__ void gelu_erf_backward_kernel(float* dinp, const float* inp, const float* dout,
                                         int64_t n) {
  SNUG_GRID_STRIDE(i, n) {
    const double x = inp[i];
    const double cdf = 0.5 * (1.0 + erf(x * kInvSqrt2));
    dinp[i] = static_cast<float>((cdf + x * kInvSqrt2Pi * exp(-0.5 * x * x)) * dout[i]);
  }
}

__global__ void tanh_forward_kernel(float* out, const float* in, int64_t n) {
  SNUG_GRID_STRIDE(i, n) out[i] = static_cast<float>(tanh(static_cast<double>(in[i])));
}

__global__ void tanh_backward_kernel(float* din, const float* out, const float* dout, int64_t n) {
  SNUG_GRID_STRIDE(i, n) {
    const double y = out[i];
    din[i] = static_cast<float>((1.0 - y * y) * dout[i]);
  }
}

#define SNUG_UNARY_OP(name)                                       \
  void name(float* out, const float* in, int64_t n) {             \
    if (n <= 0) return;                                           \
    name##_kernel<<<grid_for(n), 256, 0, stream()>>>(out, in, n); \
    check_launch(#name);                                          \
  }
#define SNUG_BINARY_OP(name)                                            \
  void name(float* din, const float* a, const float* dout, int64_t n) { \
    if (n <= 0) return;                                                 \
    name##_kernel<<<grid_for(n), 256, 0, stream()>>>(din, a, dout, n);  \
    check_launch(#name);                                                \
  }
SNUG_UNARY_OP(gelu_forward)
SNUG_BINARY_OP(gelu_backward)
SNUG_UNARY_OP(gelu_erf_forward)
SNUG_BINARY_OP(gelu_erf_backward)
SNUG_UNARY_OP(tanh_forward)
SNUG_BINARY_OP(tanh_backward)
#undef SNUG_UNARY_OP
#undef SNUG_BINARY_OP

// ---- bias rows ------------------------------------------------------------------------------

__global__ void add_bias_rows_kernel(float* x, const float* b, int64_t C, int64_t n) {
  SNUG_GRID_STRIDE(i, n) x[i] += b[i % C];
}

void add_bias_rows(float* x, const float* b, int64_t N, int64_t C) {
  if (N * C <= 0) return;
  add_bias_rows_kernel<<<grid_for(N * C), 256, 0, stream()>>>(x, b, C, N * C);
  check_launch("add_bias_rows");
}

void bias_grad_rows(float* db, const float* dy, int64_t N, int64_t C) {
  column_sums(nullptr, db, dy, nullptr, nullptr, nullptr, N, C, "bias_grad_rows");
}

// ---- dropout (the mask of kernels/dropout_mask.h, bit for bit) ------------------------------

using kernels::dropout_keep;

__global__ void dropout_forward_kernel(float* out, uint8_t* mask, const float* in, int64_t n,
                                       double p, uint64_t key, float inv_keep) {
  SNUG_GRID_STRIDE(i, n) {
    const bool keep = dropout_keep(key, i, p);
    if (mask) mask[i] = keep ? 1 : 0;
    out[i] = keep ? in[i] * inv_keep : 0.0f;
  }
}

__global__ void dropout_backward_kernel(float* din, const float* dout, const uint8_t* mask,
                                        int64_t n, float inv_keep) {
  SNUG_GRID_STRIDE(i, n) din[i] = mask[i] != 0 ? dout[i] * inv_keep : 0.0f;
}

void dropout_forward(float* out, uint8_t* mask, const float* in, int64_t n, double p,
                     uint64_t key) {
  if (n <= 0) return;
  dropout_forward_kernel<<<grid_for(n), 256, 0, stream()>>>(out, mask, in, n, p, key,
                                                            static_cast<float>(1.0 / (1.0 - p)));
  check_launch("dropout_forward");
}

void dropout_backward(float* din, const float* dout, const uint8_t* mask, int64_t n, double p) {
  if (n <= 0) return;
  dropout_backward_kernel<<<grid_for(n), 256, 0, stream()>>>(din, dout, mask, n,
                                                             static_cast<float>(1.0 / (1.0 - p)));
  check_launch("dropout_backward");
}

// ---- AdamW (torch.optim.AdamW's single-tensor order, in double, as the reference) ----------

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, float beta1,
                             float beta2, float eps, double decay, double step_size,
                             double bc2_sqrt) {
  SNUG_GRID_STRIDE(i, n) {
    double pi = p[i];
    const double gi = g[i];
    pi *= decay;
    const double mi = beta1 * static_cast<double>(m[i]) + (1.0 - beta1) * gi;
    const double vi = beta2 * static_cast<double>(v[i]) + (1.0 - beta2) * gi * gi;
    const double denom = sqrt(vi) / bc2_sqrt + eps;
    pi -= step_size * mi / denom;
    p[i] = static_cast<float>(pi);
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
  }
}

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, float lr, float beta1,
                  float beta2, float eps, float weight_decay, int64_t t) {
  if (n <= 0) return;
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(t));
  adamw_kernel<<<grid_for(n), 256, 0, stream()>>>(p, g, m, v, n, beta1, beta2, eps,
                                                  1.0 - static_cast<double>(lr) * weight_decay,
                                                  lr / bc1, std::sqrt(bc2));
  check_launch("adamw_update");
}

#undef SNUG_GRID_STRIDE

}  // namespace

void register_blocks(OpTable& t) {
  t.embedding_forward = &embedding_forward;
  t.embedding_backward = &embedding_backward;
  t.layernorm_forward = &layernorm_forward;
  t.layernorm_backward = &layernorm_backward;
  t.gelu_forward = &gelu_forward;
  t.gelu_backward = &gelu_backward;
  t.gelu_erf_forward = &gelu_erf_forward;
  t.gelu_erf_backward = &gelu_erf_backward;
  t.tanh_forward = &tanh_forward;
  t.tanh_backward = &tanh_backward;
  t.add_bias_rows = &add_bias_rows;
  t.bias_grad_rows = &bias_grad_rows;
  t.dropout_forward = &dropout_forward;
  t.dropout_backward = &dropout_backward;
  t.adamw_update = &adamw_update;
}

}  // namespace snug::cuda

// Llama's row and elementwise ops (kernels/ops.inc): rmsnorm_forward/backward, swiglu_forward/
// backward.
//
// RMSNorm: one block per row; the row's sums (sum x^2, sum w g x) in float per thread, then a
// fixed-order tree (warp shuffles, then the warps' partials), so two runs give the same bits.
// dw: one block per 32 columns, 16 row groups striding over the rows in double, the groups'
// partials added in a fixed order: no atomics.
#include "core/error.h"
#include "kernels/cuda/context.cuh"

namespace snug::cuda {

namespace {

constexpr int kRowThreads = 256;

// The sum of v over the block (every thread gets it); `red` holds one float per warp.
__device__ float block_sum(float v, float* red) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // red may still be read by a previous call
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float s = 0.0f;
  for (int w = 0; w < static_cast<int>(blockDim.x / 32); ++w) s += red[w];
  return s;
}

// out(N,C) = w * (x * r), r = 1/sqrt(mean(x^2) + eps); rstd(N) = r.
__global__ void rmsnorm_forward_kernel(float* out, float* rstd, const float* inp, const float* w,
                                       int64_t C, float eps) {
  __shared__ float red[kRowThreads / 32];
  const int64_t n = blockIdx.x;
  const float* x = inp + n * C;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) ss += x[c] * x[c];
  ss = block_sum(ss, red);
  const float r = 1.0f / sqrtf(ss / static_cast<float>(C) + eps);
  float* o = out + n * C;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) o[c] = w[c] * (x[c] * r);
  if (threadIdx.x == 0) rstd[n] = r;
}

// dinp(N,C) += r w g - x r^3 / C * sum_c(w g x).
__global__ void rmsnorm_dinp_kernel(float* dinp, const float* dout, const float* inp,
                                    const float* w, const float* rstd, int64_t C) {
  __shared__ float red[kRowThreads / 32];
  const int64_t n = blockIdx.x;
  const float* x = inp + n * C;
  const float* d = dout + n * C;
  const float r = rstd[n];
  float dot = 0.0f;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) dot += w[c] * d[c] * x[c];
  dot = block_sum(dot, red);
  const float k = r * r * r * dot / static_cast<float>(C);
  float* g = dinp + n * C;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) g[c] += r * w[c] * d[c] - x[c] * k;
}

constexpr int kColumns = 32, kRowGroups = 16;

// dw(C) += sum_n g x r: block (32 columns, 16 row groups), partials summed in order.
__global__ void rmsnorm_dw_kernel(float* dw, const float* dout, const float* inp, const float* rstd,
                                  int64_t N, int64_t C) {
  __shared__ double part[kRowGroups][kColumns];
  const int64_t c = blockIdx.x * int64_t{kColumns} + threadIdx.x;
  double acc = 0.0;
  if (c < C)
    for (int64_t n = threadIdx.y; n < N; n += kRowGroups)
      acc += static_cast<double>(dout[n * C + c]) * (inp[n * C + c] * rstd[n]);
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    double s = 0.0;
    for (int y = 0; y < kRowGroups; ++y) s += part[y][threadIdx.x];
    dw[c] += static_cast<float>(s);
  }
}

__global__ void swiglu_forward_kernel(float* out, const float* gate, const float* up, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void swiglu_backward_kernel(float* dgate, float* dup, const float* dout,
                                       const float* gate, const float* up, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const float g = gate[i], d = dout[i], u = up[i];  // read first: dup or dgate may alias dout
    const float s = 1.0f / (1.0f + expf(-g));
    if (dup) dup[i] = d * g * s;
    if (dgate) dgate[i] = d * u * s * (1.0f + g * (1.0f - s));
  }
}

unsigned grid_for(int64_t n) {
  const unsigned b = blocks_for(n);
  return b > 8192 ? 8192 : b;
}

unsigned rows_grid(int64_t N, const char* what) {
  SNUG_CHECK(N <= 2147483647, what, ": N=", N, " rows exceed the CUDA grid");
  return static_cast<unsigned>(N);
}

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* w, int64_t N,
                     int64_t C, float eps) {
  if (N <= 0) return;
  rmsnorm_forward_kernel<<<rows_grid(N, "rmsnorm_forward"), kRowThreads, 0, stream()>>>(
      out, rstd, inp, w, C, eps);
  check_launch("rmsnorm_forward");
}

void rmsnorm_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                      const float* rstd, int64_t N, int64_t C) {
  if (N <= 0 || C <= 0) return;
  if (dinp) {
    rmsnorm_dinp_kernel<<<rows_grid(N, "rmsnorm_backward"), kRowThreads, 0, stream()>>>(
        dinp, dout, inp, w, rstd, C);
    check_launch("rmsnorm_backward (dinp)");
  }
  if (dw) {
    rmsnorm_dw_kernel<<<blocks_for(C, kColumns), dim3(kColumns, kRowGroups), 0, stream()>>>(
        dw, dout, inp, rstd, N, C);
    check_launch("rmsnorm_backward (dw)");
  }
}

void swiglu_forward(float* out, const float* gate, const float* up, int64_t n) {
  if (n <= 0) return;
  swiglu_forward_kernel<<<grid_for(n), 256, 0, stream()>>>(out, gate, up, n);
  check_launch("swiglu_forward");
}

void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate,
                     const float* up, int64_t n) {
  if (n <= 0 || (!dgate && !dup)) return;
  swiglu_backward_kernel<<<grid_for(n), 256, 0, stream()>>>(dgate, dup, dout, gate, up, n);
  check_launch("swiglu_backward");
}

}  // namespace

void register_llama(OpTable& t) {
  t.rmsnorm_forward = &rmsnorm_forward;
  t.rmsnorm_backward = &rmsnorm_backward;
  t.swiglu_forward = &swiglu_forward;
  t.swiglu_backward = &swiglu_backward;
}

}  // namespace snug::cuda

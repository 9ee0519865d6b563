// Cross-entropy on the GPU (kernels/ops.inc, kernels/lm_head_ops.inc): count_valid_targets,
// softmax_xent_forward/backward and the chunked LM head lm_head_xent (fp32 and bf16).
//
// Each row's softmax is one block (reduce.cuh: fixed order, so losses are bit-identical between
// runs): per-thread running max and float sums of exp, combined in double, loss = log(sum) -
// (x[target] - max) in double (the reference sums every exp in double; the two agree to ~1e-7). The
// returned sum is taken on the host over per-row double losses in row order. Target range checks
// run on the host over a downloaded copy of the targets (N int32: a few KiB) so that they throw the
// CPU's snug::Error text; that copy also gives lm_head_xent its per-chunk valid counts.
//
// Device memory outside the pool: N doubles of per-row losses per call (16 KiB at N = 2048).
#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/arg_checks.h"
#include "kernels/cuda/context.cuh"
#include "kernels/cuda/half_bits.cuh"
#include "kernels/cuda/reduce.cuh"

namespace snug {
const OpTable& cuda_op_table();  // op_table.cu
}  // namespace snug

namespace snug::cuda {

namespace {

// ---- count_valid_targets --------------------------------------------------------------------

__global__ void count_valid_kernel(const int32_t* targets, int64_t n, unsigned long long* count) {
  unsigned long long c = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    c += targets[i] >= 0 ? 1 : 0;
  atomicAdd(count, c);  // integers: the order does not matter
}

int64_t count_valid_targets(const int32_t* targets, int64_t n) {
  if (n <= 0) return 0;
  Scratch acc(sizeof(unsigned long long));
  check(cudaMemsetAsync(acc.as<unsigned long long>(), 0, sizeof(unsigned long long), stream()),
        "count_valid_targets memset");
  const unsigned grid = std::min(blocks_for(n), 1024u);
  count_valid_kernel<<<grid, 256, 0, stream()>>>(targets, n, acc.as<unsigned long long>());
  check_launch("count_valid_targets");
  unsigned long long h = 0;
  check(
      cudaMemcpyAsync(&h, acc.as<unsigned long long>(), sizeof h, cudaMemcpyDeviceToHost, stream()),
      "count_valid_targets download");
  sync("count_valid_targets");
  return static_cast<int64_t>(h);
}

// ---- row softmax ----------------------------------------------------------------------------

int softmax_threads(int64_t V) {
  return V >= 8192 ? 1024 : (V >= 1024 ? 256 : 64);
}

// What a row kernel writes besides the loss.
enum class RowOut {
  none,          // forward only
  probs,         // softmax_xent_forward: out = softmax (all rows)
  dlogits,       // lm_head_xent backward: out = (softmax - onehot) * scale, 0 for ignored rows
  dlogits_bf16,  // the same rounded to bf16, over the front half of each row's own floats
};

// One block per row of x(rows, V), rows ld floats apart (ld >= V): loss_d[row] =
// -log softmax(x)[target] (0 for target < 0), in double; losses[row] the same as float when
// non-null; out (same row stride) per `what` (out may alias x).
//
// Two passes over the row. Each thread keeps a running max and a float sum of exp over its
// elements (rescaled when the max grows); the block combines them in double (fixed order, so runs
// give the same bits), and the output pass takes exp in float (an earlier kernel took every exp
// and division in double, over three passes). On an H200, in a profile of the bf16 GPT-2 step
// (B=16, T=1024), the head's time outside its GEMMs went from 15 ms a step to 5.5.
__global__ void softmax_rows_kernel(float* out, float* losses, double* loss_d, const float* x_all,
                                    const int32_t* targets, int64_t V, int64_t ld, float scale,
                                    RowOut what) {
  const int64_t row = blockIdx.x;
  const float* x = x_all + row * ld;
  float* o = out + row * ld;
  auto* half = reinterpret_cast<uint16_t*>(o);
  const int32_t tgt = targets[row];
  if (tgt < 0 && what != RowOut::probs) {
    if (what == RowOut::dlogits)
      for (int64_t j = threadIdx.x; j < V; j += blockDim.x) o[j] = 0.0f;
    if (what == RowOut::dlogits_bf16)
      for (int64_t j = threadIdx.x; j < V; j += blockDim.x) half[j] = 0;
    if (threadIdx.x == 0) {
      loss_d[row] = 0.0;
      if (losses) losses[row] = 0.0f;
    }
    return;
  }
  float m = -INFINITY, s = 0.0f;
  for (int64_t j = threadIdx.x; j < V; j += blockDim.x) {
    const float v = x[j];
    if (v > m) {
      s = s * expf(m - v) + 1.0f;
      m = v;
    } else if (m != -INFINITY) {
      s += expf(v - m);
    } else if (v != v) {
      s = v;  // NaN: the loss is NaN, as the reference's
    }
  }
  const float mx = block_max(m);
  const double sum =
      block_sum(s == 0.0f ? 0.0 : static_cast<double>(s) * exp(static_cast<double>(m) - mx));
  // The target logit is read before out (which may alias x) is written: block_sum's barriers
  // order every thread's reads above before any write below.
  const double loss = tgt >= 0 ? log(sum) - (static_cast<double>(x[tgt]) - mx) : 0.0;
  __syncthreads();
  const float inv = static_cast<float>(1.0 / sum);
  const auto dlogit = [&](int64_t j) {
    return (expf(x[j] - mx) * inv - (j == tgt ? 1.0f : 0.0f)) * scale;
  };
  if (what == RowOut::probs) {
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) o[j] = expf(x[j] - mx) * inv;
  } else if (what == RowOut::dlogits) {
    for (int64_t j = threadIdx.x; j < V; j += blockDim.x) o[j] = dlogit(j);
  } else if (what == RowOut::dlogits_bf16) {
    // Tiles of blockDim.x values: a tile's bf16 writes land on floats of this tile or earlier
    // ones (half j is within float j / 2), all read before the barrier that precedes the writes.
    for (int64_t base = 0; base < V; base += blockDim.x) {
      const int64_t j = base + threadIdx.x;
      const float d = j < V ? dlogit(j) : 0.0f;
      __syncthreads();
      if (j < V) half[j] = f32_to_bf16(d);
    }
  }
  if (threadIdx.x == 0) {
    loss_d[row] = loss;
    if (losses) losses[row] = static_cast<float>(loss);
  }
}

void softmax_rows(float* out, float* losses, double* loss_d, const float* x, const int32_t* targets,
                  int64_t rows, int64_t V, int64_t ld, float scale, RowOut what, const char* op) {
  if (rows <= 0) return;
  softmax_rows_kernel<<<static_cast<unsigned>(rows), softmax_threads(V), 0, stream()>>>(
      out, losses, loss_d, x, targets, V, ld, scale, what);
  check_launch(op);
}

std::vector<int32_t> download_targets(const int32_t* targets, int64_t n, const char* what) {
  std::vector<int32_t> h(static_cast<size_t>(std::max<int64_t>(n, 0)));
  if (n > 0) {
    check(cudaMemcpyAsync(h.data(), targets, h.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
                          stream()),
          what);
    sync(what);
  }
  return h;
}

// The sum of the n per-row losses in row order (the reference's order).
double sum_losses(const double* loss_d, int64_t n, const char* what) {
  std::vector<double> h(static_cast<size_t>(n));
  check(cudaMemcpyAsync(h.data(), loss_d, h.size() * sizeof(double), cudaMemcpyDeviceToHost,
                        stream()),
        what);
  sync(what);
  double total = 0.0;
  for (double l : h) total += l;
  return total;
}

// ---- softmax_xent ---------------------------------------------------------------------------

double softmax_xent_forward(float* losses, float* probs, const float* logits,
                            const int32_t* targets, int64_t N, int64_t V) {
  const std::vector<int32_t> host = download_targets(targets, N, "softmax_xent_forward targets");
  kernels::detail::check_targets(host.data(), N, V, "softmax_xent_forward");
  if (N <= 0) return 0.0;
  Scratch loss_d(static_cast<size_t>(N) * sizeof(double));
  softmax_rows(probs, losses, loss_d.as<double>(), logits, targets, N, V, V, 1.0f, RowOut::probs,
               "softmax_xent_forward");
  return sum_losses(loss_d.as<double>(), N, "softmax_xent_forward losses");
}

__global__ void softmax_xent_backward_kernel(float* dlogits, const float* probs,
                                             const int32_t* targets, float scale, int64_t V,
                                             int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int32_t tgt = targets[i / V];
    const int64_t j = i % V;
    const double p = probs[i];
    dlogits[i] = tgt < 0 ? 0.0f : static_cast<float>((p - (j == tgt ? 1.0 : 0.0)) * scale);
  }
}

void softmax_xent_backward(float* dlogits, const float* probs, const int32_t* targets, float scale,
                           int64_t N, int64_t V) {
  const int64_t n = N * V;
  if (n <= 0) return;
  softmax_xent_backward_kernel<<<std::min(blocks_for(n), 8192u), 256, 0, stream()>>>(
      dlogits, probs, targets, scale, V, n);
  check_launch("softmax_xent_backward");
}

// ---- lm_head_xent ---------------------------------------------------------------------------

void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cuda_op_table().gemm_f32(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
          const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cuda_op_table().gemm_bf16(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
}

// kernels/lm_head.cpp's row-chunked path, GEMMs through the CUDA table (the CPU's forward-only
// vocabulary slicing is an oneDNN speed choice with the same results; it is not needed here).
// The logits rows in scratch are ld = V rounded up to 8 floats apart, so that every row (and its
// bf16 dlogits) starts 16-byte aligned and cuBLASLt can take its vectorized kernels (with
// V = 50257 the bf16 head products ran at 91-139 TFLOP/s on an H200, the Linears' at 350-641);
// the chunk shrinks by the rows that padding costs, so the caller's scratch of chunk * V floats
// still holds it (the same results: rows are independent).
template <typename T>
double lm_head_xent_impl(float* losses, float* dlnf, float* dwte, const T* lnf, const T* wte,
                         const int32_t* targets, int64_t N, int64_t C, int64_t V, float scale,
                         float* scratch, int64_t chunk) {
  const std::vector<int32_t> host = download_targets(targets, N, "lm_head_xent targets");
  kernels::detail::check_lm_head_args(host.data(), N, C, V, chunk);
  if (N == 0) return 0.0;
  chunk = std::min(chunk, N);
  const int64_t ld = (V + 7) / 8 * 8;
  if (ld != V) chunk = std::max<int64_t>(1, chunk * V / ld);
  const bool backward = dlnf != nullptr || dwte != nullptr;
  Scratch loss_d(static_cast<size_t>(N) * sizeof(double));
  constexpr bool bf16 = sizeof(T) == 2;
  const RowOut what = !backward ? RowOut::none : (bf16 ? RowOut::dlogits_bf16 : RowOut::dlogits);
  // dlogits as the backward GEMMs' operand: fp32 rows ld apart, or bf16 over the front half of
  // each fp32 row (2 ld halves apart; written so by the softmax, nothing moved).
  const int64_t ld_dl = bf16 ? 2 * ld : ld;
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t m = std::min(chunk, N - r0);
    const bool any_valid =
        std::any_of(host.begin() + r0, host.begin() + r0 + m, [](int32_t t) { return t >= 0; });
    if (!any_valid) {  // nothing to learn from these rows: skip the GEMMs
      check(cudaMemsetAsync(loss_d.as<double>() + r0, 0, m * sizeof(double), stream()),
            "lm_head_xent");
      if (losses)
        check(cudaMemsetAsync(losses + r0, 0, m * sizeof(float), stream()), "lm_head_xent");
      if (dlnf)
        check(cudaMemsetAsync(dlnf + r0 * C, 0, m * C * sizeof(float), stream()), "lm_head_xent");
      continue;
    }
    // logits(m,V) = lnf[r0:r0+m] @ wte^T
    gemm(false, true, m, V, C, lnf + r0 * C, C, wte, C, 0.0f, scratch, ld);
    softmax_rows(scratch, losses ? losses + r0 : nullptr, loss_d.as<double>() + r0, scratch,
                 targets + r0, m, V, ld, scale, what, "lm_head_xent");
    if (!backward) continue;
    // dwte += dlogits^T @ lnf first, then dlnf = dlogits @ wte: dlnf may alias lnf.
    const T* dl = reinterpret_cast<const T*>(scratch);
    if (dwte) gemm(true, false, V, C, m, dl, ld_dl, lnf + r0 * C, C, 1.0f, dwte, C);
    if (dlnf) gemm(false, false, m, C, V, dl, ld_dl, wte, C, 0.0f, dlnf + r0 * C, C);
  }
  return sum_losses(loss_d.as<double>(), N, "lm_head_xent losses");
}

double lm_head_xent(float* losses, float* dlnf, float* dwte, const float* lnf, const float* wte,
                    const int32_t* targets, int64_t N, int64_t C, int64_t V, float scale,
                    float* scratch, int64_t chunk) {
  return lm_head_xent_impl(losses, dlnf, dwte, lnf, wte, targets, N, C, V, scale, scratch, chunk);
}

double lm_head_xent_bf16(float* losses, float* dlnf, float* dwte, const uint16_t* lnf,
                         const uint16_t* wte, const int32_t* targets, int64_t N, int64_t C,
                         int64_t V, float scale, float* scratch, int64_t chunk) {
  return lm_head_xent_impl(losses, dlnf, dwte, lnf, wte, targets, N, C, V, scale, scratch, chunk);
}

}  // namespace

void register_xent(OpTable& t) {
  t.count_valid_targets = &count_valid_targets;
  t.softmax_xent_forward = &softmax_xent_forward;
  t.softmax_xent_backward = &softmax_xent_backward;
  t.lm_head_xent = &lm_head_xent;
  t.lm_head_xent_bf16 = &lm_head_xent_bf16;
}

}  // namespace snug::cuda

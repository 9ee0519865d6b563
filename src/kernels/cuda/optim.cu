// The optimizer updates of kernels/optim_ops.inc and the --bf16-full steps of kernels/ops.inc
// (adamw_update_bf16, sgd_update_bf16, lomo_update_bf16, adalomo_update_bf16) on the GPU.
//
// Why they give the reference's bits: the per-element math is kernels/optim_math.h's and
// adamw_math.h's own functions (SNUG_HD), the per-step scalars are formed on the host by the same
// functions the reference calls, and this file is compiled without fused multiply-adds
// (src/CMakeLists.txt), so each element is rounded exactly as on the host; the 8-bit states'
// codes, the stochastic rounding bits (kernels/stochastic_round.h) and the bf16 values then match
// bit for bit. Adafactor's reductions (row sums, the mean of R, the update's RMS) run in double
// with a fixed owner per sum and a fixed tree, so two runs give the same bits; their order
// differs from the reference's sequential loops, which stays within float rounding of it.
#include <algorithm>

#include "kernels/adamw_math.h"
#include "kernels/cuda/context.cuh"
#include "kernels/cuda/half_bits.cuh"
#include "kernels/optim_math.h"
#include "kernels/optim_ops.h"
#include "kernels/stochastic_round.h"

namespace snug::cuda {

namespace {

constexpr int kThreads = 256;  // every kernel here; the 8-bit ones need one thread per element
static_assert(quant8::kOptimizerBlock == kThreads, "one thread per 8-bit block element");

unsigned grid_for(int64_t n) {
  return std::min(blocks_for(n, kThreads), 4096u);
}

__device__ int64_t first_index() {
  return blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
}
__device__ int64_t grid_stride() {
  return int64_t{gridDim.x} * blockDim.x;
}

// ---- fp32 element-wise updates ----

__global__ void sgd_kernel(float* p, const float* g, float* buf, int64_t n, float lr, float mu,
                           float wd, bool first) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    kernels::sgd_element(g[i], p[i], buf ? &buf[i] : nullptr, lr, mu, wd, first);
}

__global__ void lion_kernel(float* p, const float* g, float* m, int64_t n, kernels::LionScalars s,
                            bool bnb) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    if (bnb)
      kernels::lion_bnb_element(s, g[i], m[i], p[i]);
    else
      kernels::lion_element(s, g[i], m[i], p[i]);
  }
}

__global__ void adam_bnb_kernel(float* p, const float* g, float* m, float* v, int64_t n,
                                kernels::AdamBnbScalars s) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    kernels::adam_bnb_element(s, g[i], m[i], v[i], p[i]);
}

__global__ void lomo_kernel(float* p, const float* g, int64_t n, float lr, float wd, float decay,
                            float grad_coef) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float gi = grad_coef != 1.0f ? g[i] * grad_coef : g[i];
    if (wd > 0.0f) p[i] = p[i] * decay;
    p[i] = p[i] + (-lr) * gi;
  }
}

__global__ void galore_adam_kernel(float* p, const float* g, float* m, float* v, int64_t n,
                                   float b1, float b2, float eps, float neg_step, float decay_alpha,
                                   bool decay) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float u = kernels::galore_adam_element(g[i], m[i], v[i], b1, b2, eps);
    kernels::galore_apply_element(p[i], u, neg_step, decay_alpha, decay);
  }
}

__global__ void galore_normalize_kernel(float* low, float* m, float* v, int64_t n, float b1,
                                        float b2, float eps) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    low[i] = kernels::galore_adam_element(low[i], m[i], v[i], b1, b2, eps);
}

__global__ void galore_apply_kernel(float* p, const float* back, int64_t n, float neg_step,
                                    float scale, float decay_alpha, bool decay) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    kernels::galore_apply_element(p[i], back[i] * scale, neg_step, decay_alpha, decay);
}

// ---- 8-bit block-wise states (one thread block per state block of 256 elements) ----

// A quant8::Code's values and midpoints (the midpoints formed as its constructor forms them), by
// value as a kernel argument and copied to shared memory, where the threads' searches read them.
struct DeviceCode {
  float values[256];
  float mid[255];
};

DeviceCode device_code(const quant8::Code& code) {
  DeviceCode d;
  for (int i = 0; i < 256; ++i) d.values[i] = code.value(static_cast<uint8_t>(i));
  for (int i = 0; i + 1 < 256; ++i) d.mid[i] = (d.values[i] + d.values[i + 1]) / 2.0f;
  return d;
}

struct SharedCode {
  float values[256];
  float mid[256];  // the last entry unused
};

// Called by all kThreads threads of the block; the caller syncs before reading.
__device__ void load_code(SharedCode& s, const DeviceCode& c) {
  s.values[threadIdx.x] = c.values[threadIdx.x];
  if (threadIdx.x < 255) s.mid[threadIdx.x] = c.mid[threadIdx.x];
}

// quant8::Code::nearest_reference: the first midpoint >= x (std::lower_bound; NaN gives 0).
__device__ unsigned nearest(const SharedCode& c, float x) {
  unsigned lo = 0, hi = 255;
  while (lo < hi) {
    const unsigned m = (lo + hi) / 2;
    if (c.mid[m] < x)
      lo = m + 1;
    else
      hi = m;
  }
  return lo;
}

// quant8::Code::nearest_signed: a code of the other sign than x moves one step towards x's.
__device__ unsigned nearest_signed(const SharedCode& c, float x) {
  unsigned q = nearest(c, x);
  if ((__float_as_uint(c.values[q]) >> 31) != (__float_as_uint(x) >> 31)) {
    if (x > 0.0f && q < 255)
      ++q;
    else if (!(x > 0.0f) && q > 0)
      --q;
  }
  return q;
}

// The block's max of a (>= 0, or NaN, which is skipped as the reference's std::max(a, x) skips it:
// fmaxf drops a NaN operand and the result starts from 0). Called by every thread.
__device__ float block_absmax(float a) {
  __shared__ float warp_max[kThreads / 32];
  for (int o = 16; o > 0; o /= 2) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = a;
  __syncthreads();
  float r = 0.0f;
  for (int w = 0; w < kThreads / 32; ++w) r = fmaxf(r, warp_max[w]);
  __syncthreads();  // warp_max is reused by the next call
  return r;
}

// The reference's quantize8 of one element of a block with max |x| = a.
__device__ uint8_t quantize_element(const SharedCode& c, float x, float a, bool is_signed) {
  const float inv = a > 0.0f ? 1.0f / a : 0.0f;
  const float y = x * inv;
  return static_cast<uint8_t>(is_signed ? nearest_signed(c, y) : nearest(c, y));
}

__global__ void lion_8bit_kernel(float* p, const float* g, uint8_t* qm, float* absmax_m, int64_t n,
                                 kernels::LionScalars s, DeviceCode code) {
  __shared__ SharedCode c;
  load_code(c, code);
  __syncthreads();
  const int64_t b = blockIdx.x, i = b * kThreads + threadIdx.x;
  const bool active = i < n;
  float m = 0.0f;
  if (active) {
    m = c.values[qm[i]] * absmax_m[b];
    kernels::lion_bnb_element(s, g[i], m, p[i]);
  }
  const float am = block_absmax(active ? fabsf(m) : 0.0f);  // every thread read absmax_m[b]
  if (threadIdx.x == 0) absmax_m[b] = am;
  if (active) qm[i] = quantize_element(c, m, am, true);
}

__global__ void adam_8bit_kernel(float* p, const float* g, uint8_t* qm, uint8_t* qv,
                                 float* absmax_m, float* absmax_v, int64_t n,
                                 kernels::AdamBnbScalars s, DeviceCode code_m, DeviceCode code_v) {
  __shared__ SharedCode cm, cv;
  load_code(cm, code_m);
  load_code(cv, code_v);
  __syncthreads();
  const int64_t b = blockIdx.x, i = b * kThreads + threadIdx.x;
  const bool active = i < n;
  float m = 0.0f, v = 0.0f;
  if (active) {
    m = cm.values[qm[i]] * absmax_m[b];
    v = cv.values[qv[i]] * absmax_v[b];
    kernels::adam_bnb_element(s, g[i], m, v, p[i]);
  }
  const float am = block_absmax(active ? fabsf(m) : 0.0f);  // every thread read both absmax
  const float av = block_absmax(active ? fabsf(v) : 0.0f);
  if (threadIdx.x == 0) {
    absmax_m[b] = am;
    absmax_v[b] = av;
  }
  if (active) {
    qm[i] = quantize_element(cm, m, am, true);
    qv[i] = quantize_element(cv, v, av, false);
  }
}

// ---- Adafactor / AdaLomo ----

// The sum of x over the block in double, in a fixed tree (the same bits every run). Every
// thread calls it; thread 0 gets the total.
__device__ double block_sum(double x) {
  __shared__ double part[kThreads];
  part[threadIdx.x] = x;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  const double total = part[0];
  __syncthreads();  // part is reused by the next call
  return total;
}

// The gradient as the second moment reads it: fp32 (F32Grad), or bf16 widened and times the
// clipping coefficient (Bf16Grad, the --bf16-full section below).
struct F32Grad {
  const float* g;
  __device__ float operator()(int64_t k) const { return g[k]; }
};

template <typename G>
__device__ double g2(const G& g, int64_t k) {
  const float x = g(k);
  return static_cast<double>(x * x + kernels::kAdafactorEps1);
}

// R (batch rows): one block per row, g^2 + eps1 summed over the columns.
template <typename G>
__global__ void row_moment_kernel(G g, float* R, int64_t cols, float beta2t,
                                  float one_minus_beta2t) {
  const int64_t row = blockIdx.x;  // b * rows + i
  double s = 0.0;
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) s += g2(g, row * cols + j);
  s = block_sum(s);
  if (threadIdx.x == 0)
    R[row] = R[row] * beta2t + one_minus_beta2t * static_cast<float>(s / static_cast<double>(cols));
}

// C (batch cols): one thread per column, summing down the rows in the reference's order.
template <typename G>
__global__ void col_moment_kernel(G g, float* C, int64_t batch, int64_t rows, int64_t cols,
                                  float beta2t, float one_minus_beta2t) {
  for (int64_t bj = first_index(); bj < batch * cols; bj += grid_stride()) {
    const int64_t b = bj / cols, j = bj % cols;
    double s = 0.0;
    for (int64_t i = 0; i < rows; ++i) s += g2(g, (b * rows + i) * cols + j);
    C[bj] = C[bj] * beta2t + one_minus_beta2t * static_cast<float>(s / static_cast<double>(rows));
  }
}

// rmean[b] = mean of R's row b (one block per batch entry).
__global__ void row_mean_kernel(const float* R, int64_t rows, float* rmean) {
  const float* Rb = R + blockIdx.x * rows;
  double s = 0.0;
  for (int64_t i = threadIdx.x; i < rows; i += kThreads) s += Rb[i];
  s = block_sum(s);
  if (threadIdx.x == 0) rmean[blockIdx.x] = static_cast<float>(s / static_cast<double>(rows));
}

// The factored update of element k (R, C and rmean already updated).
template <typename G>
__device__ float factored_u(const G& g, const float* R, const float* C, const float* rmean,
                            int64_t rows, int64_t cols, int64_t k) {
  const int64_t b = k / (rows * cols), i = (k / cols) % rows, j = k % cols;
  return (kernels::rsqrt_f32(R[b * rows + i] / rmean[b]) * kernels::rsqrt_f32(C[b * cols + j])) *
         g(k);
}

// U of every element (V updated here for a vector), written to u_out when not null (it may be
// g itself: AdaLomo), and each block's sum of U^2 in partial[blockIdx.x].
template <typename G>
__global__ void update_sumsq_kernel(G g, float* u_out, const float* R, const float* C, float* V,
                                    const float* rmean, int64_t rows, int64_t cols, int64_t n,
                                    float beta2t, float one_minus_beta2t, double* partial) {
  double ss = 0.0;
  for (int64_t k = first_index(); k < n; k += grid_stride()) {
    const float u = V ? kernels::vector_moment_update(g(k), V[k], beta2t, one_minus_beta2t)
                      : factored_u(g, R, C, rmean, rows, cols, k);
    if (u_out) u_out[k] = u;
    ss += static_cast<double>(u) * static_cast<double>(u);
  }
  ss = block_sum(ss);
  if (threadIdx.x == 0) partial[blockIdx.x] = ss;
}

// denom = max(1, RMS(U)) from the blocks' partial sums (one block).
__global__ void clip_denominator_kernel(const double* partial, int parts, int64_t n, float* denom) {
  double s = 0.0;
  for (int k = threadIdx.x; k < parts; k += kThreads) s += partial[k];
  s = block_sum(s);
  if (threadIdx.x == 0) *denom = kernels::clip_denominator(s, n);
}

__global__ void adafactor_apply_kernel(float* w, const float* g, const float* R, const float* C,
                                       const float* V, const float* rmean, int64_t rows,
                                       int64_t cols, int64_t n, const float* denom, float lr_t,
                                       float decay_alpha, bool decay) {
  const float d = *denom;
  for (int64_t k = first_index(); k < n; k += grid_stride()) {
    // vector_moment_update's value, from the V it left.
    const float u =
        V ? kernels::rsqrt_f32(V[k]) * g[k] : factored_u(F32Grad{g}, R, C, rmean, rows, cols, k);
    float wk = w[k];
    if (decay) wk = wk + decay_alpha * wk;
    w[k] = wk - u / d * lr_t;
  }
}

__global__ void adalomo_apply_kernel(float* w, const float* u, int64_t n, const float* denom,
                                     float lr_t, float decay, bool apply_decay) {
  const float d = *denom;
  for (int64_t k = first_index(); k < n; k += grid_stride()) {
    float wk = w[k];
    if (apply_decay) wk = wk * decay;
    w[k] = wk + (-lr_t) * (u[k] / d);
  }
}

// Adafactor's second moment and the update's clip denominator: R, C (or V) updated; U written to
// u_out when not null; *denom (device) = max(1, RMS(U)). The scratch holds rmean and the partial
// sums; the apply kernel is queued by the caller while it is alive.
struct FactoredScratch {
  explicit FactoredScratch(int64_t batch, int parts)
      : mem(sizeof(double) * static_cast<size_t>(parts) +
            sizeof(float) * static_cast<size_t>(batch + 1)),
        partial(mem.as<double>()),
        denom(reinterpret_cast<float*>(partial + parts)),
        rmean(denom + 1) {}
  Scratch mem;
  double* partial;
  float* denom;
  float* rmean;
};

template <typename G>
void second_moment(G g, float* u_out, float* R, float* C, float* V, int64_t batch, int64_t rows,
                   int64_t cols, float beta2t, float one_minus_beta2t, const FactoredScratch& s,
                   unsigned parts, const char* what) {
  const int64_t n = batch * rows * cols;
  if (!V) {
    row_moment_kernel<<<static_cast<unsigned>(batch * rows), kThreads, 0, stream()>>>(
        g, R, cols, beta2t, one_minus_beta2t);
    check_launch(what);
    col_moment_kernel<<<grid_for(batch * cols), kThreads, 0, stream()>>>(g, C, batch, rows, cols,
                                                                         beta2t, one_minus_beta2t);
    check_launch(what);
    row_mean_kernel<<<static_cast<unsigned>(batch), kThreads, 0, stream()>>>(R, rows, s.rmean);
    check_launch(what);
  }
  update_sumsq_kernel<<<parts, kThreads, 0, stream()>>>(g, u_out, R, C, V, s.rmean, rows, cols, n,
                                                        beta2t, one_minus_beta2t, s.partial);
  check_launch(what);
  clip_denominator_kernel<<<1, kThreads, 0, stream()>>>(s.partial, static_cast<int>(parts), n,
                                                        s.denom);
  check_launch(what);
}

// ---- --bf16-full steps ----

__device__ float from_bf16(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

// core/dtype.h's f32_to_bf16: nearest even, NaN quieted.
__device__ uint16_t to_bf16(float f) {
  uint32_t u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// ref_bf16_full.cpp's stochastic rounding: the magnitude rounds up when the random 16 bits plus
// the discarded 16 bits carry; inf and NaN round to nearest.
__device__ uint16_t to_bf16_stochastic(float f, uint32_t r) {
  if (!isfinite(f)) return to_bf16(f);
  const uint32_t u = __float_as_uint(f);
  uint32_t kept = u >> 16;
  if ((r & 0xffffu) + (u & 0xffffu) >= 0x10000u) ++kept;
  return static_cast<uint16_t>(kept);
}

__global__ void adamw_bf16_kernel(uint16_t* p, const uint16_t* g, uint16_t* m, uint16_t* v,
                                  int64_t n, kernels::AdamWScalars s, uint64_t key, uint64_t key_v,
                                  int64_t offset) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    float mi = from_bf16(m[i]), vi = from_bf16(v[i]), pi = from_bf16(p[i]);
    kernels::adamw_element(s, from_bf16(g[i]), mi, vi, pi);
    m[i] = to_bf16(mi);
    v[i] = to_bf16_stochastic(vi, kernels::random_bits(key_v, offset + i));
    p[i] = to_bf16_stochastic(pi, kernels::random_bits(key, offset + i));
  }
}

// --precision-layout deepspeed: the fp32 master, m and v updated in place, the 16-bit weights
// rounded from the master to nearest even (ref_bf16_full.cpp's adamw_update_master).
__global__ void adamw_master_kernel(uint16_t* p, const uint16_t* g, float* master, float* m,
                                    float* v, int64_t n, kernels::AdamWScalars s, bool fp16) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    float mi = m[i], vi = v[i], wi = master[i];
    kernels::adamw_element(s, half_to_f32(g[i], fp16), mi, vi, wi);
    m[i] = mi;
    v[i] = vi;
    master[i] = wi;
    p[i] = f32_to_half(wi, fp16);
  }
}

__global__ void sgd_bf16_kernel(uint16_t* p, const uint16_t* g, uint16_t* buf, int64_t n, float lr,
                                float momentum, float weight_decay, bool first, uint64_t key,
                                int64_t offset) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const float w = from_bf16(p[i]);
    float d = from_bf16(g[i]);
    if (weight_decay != 0.0f) d = d + weight_decay * w;
    if (buf) {
      if (!first) d = from_bf16(buf[i]) * momentum + d;
      buf[i] = to_bf16(d);
    }
    p[i] = to_bf16_stochastic(w + (-lr) * d, kernels::random_bits(key, offset + i));
  }
}

__device__ uint16_t store_bf16(float f, bool stochastic, uint64_t key, int64_t i) {
  return stochastic ? to_bf16_stochastic(f, kernels::random_bits(key, i)) : to_bf16(f);
}

// A bf16 gradient widened, times the clipping coefficient (lomo_bf16.cpp's ClippedGrad).
struct Bf16Grad {
  const uint16_t* g;
  float coef;
  __device__ float operator()(int64_t k) const {
    const float x = from_bf16(g[k]);
    return coef != 1.0f ? x * coef : x;
  }
};

__global__ void lomo_bf16_kernel(uint16_t* p, Bf16Grad g, int64_t n, float lr, float wd,
                                 float decay, bool stochastic, uint64_t key) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    float w = from_bf16(p[i]);
    if (wd > 0.0f) w = w * decay;
    p[i] = store_bf16(w + (-lr) * g(i), stochastic, key, i);
  }
}

// AdaLomo's update on bf16 weights: U recomputed from g (no full-size scratch), as
// adafactor_apply_kernel does.
__global__ void adalomo_bf16_apply_kernel(uint16_t* w, Bf16Grad g, const float* R, const float* C,
                                          const float* V, const float* rmean, int64_t rows,
                                          int64_t cols, int64_t n, const float* denom, float lr_t,
                                          float decay, bool apply_decay, bool stochastic,
                                          uint64_t key) {
  const float d = *denom;
  for (int64_t k = first_index(); k < n; k += grid_stride()) {
    const float u = V ? kernels::rsqrt_f32(V[k]) * g(k) : factored_u(g, R, C, rmean, rows, cols, k);
    float wk = from_bf16(w[k]);
    if (apply_decay) wk = wk * decay;
    w[k] = store_bf16(wk + (-lr_t) * (u / d), stochastic, key, k);
  }
}

// ---- host wrappers (the ops' exact signatures) ----

void sgd_update(float* p, const float* g, float* buf, int64_t n, float lr, float momentum,
                float weight_decay, bool first) {
  if (n <= 0) return;
  sgd_kernel<<<grid_for(n), kThreads, 0, stream()>>>(p, g, buf, n, lr, momentum, weight_decay,
                                                     first);
  check_launch("sgd_update");
}

void lion_update(float* p, const float* g, float* m, int64_t n, float lr, float beta1, float beta2,
                 float weight_decay) {
  if (n <= 0) return;
  lion_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
      p, g, m, n, kernels::lion_scalars(lr, beta1, beta2, weight_decay), false);
  check_launch("lion_update");
}

void lion_bnb_update(float* p, const float* g, float* m, int64_t n, float lr, float beta1,
                     float beta2, float weight_decay) {
  if (n <= 0) return;
  lion_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
      p, g, m, n, kernels::lion_scalars(lr, beta1, beta2, weight_decay), true);
  check_launch("lion_bnb_update");
}

unsigned state_blocks(int64_t n) {
  return static_cast<unsigned>((n + quant8::kOptimizerBlock - 1) / quant8::kOptimizerBlock);
}

void lion_bnb_update_8bit(float* p, const float* g, uint8_t* qm, float* absmax_m, int64_t n,
                          float lr, float beta1, float beta2, float weight_decay,
                          const quant8::Code* code) {
  if (n <= 0) return;
  lion_8bit_kernel<<<state_blocks(n), kThreads, 0, stream()>>>(
      p, g, qm, absmax_m, n, kernels::lion_scalars(lr, beta1, beta2, weight_decay),
      device_code(*code));
  check_launch("lion_bnb_update_8bit");
}

void adamw_bnb_update(float* p, const float* g, float* m, float* v, int64_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, int64_t t) {
  if (n <= 0) return;
  adam_bnb_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
      p, g, m, v, n, kernels::adam_bnb_scalars(lr, beta1, beta2, eps, weight_decay, t));
  check_launch("adamw_bnb_update");
}

void adamw_bnb_update_8bit(float* p, const float* g, uint8_t* qm, uint8_t* qv, float* absmax_m,
                           float* absmax_v, int64_t n, float lr, float beta1, float beta2,
                           float eps, float weight_decay, int64_t t, const quant8::Code* code_m,
                           const quant8::Code* code_v) {
  if (n <= 0) return;
  adam_8bit_kernel<<<state_blocks(n), kThreads, 0, stream()>>>(
      p, g, qm, qv, absmax_m, absmax_v, n,
      kernels::adam_bnb_scalars(lr, beta1, beta2, eps, weight_decay, t), device_code(*code_m),
      device_code(*code_v));
  check_launch("adamw_bnb_update_8bit");
}

unsigned reduction_parts(int64_t n) {
  return std::min(grid_for(n), 1024u);
}

void adafactor_update(float* w, const float* g, float* R, float* C, float* V, int64_t batch,
                      int64_t rows, int64_t cols, float beta2t, float one_minus_beta2t, float lr_t,
                      float decay_alpha, bool decay) {
  const int64_t n = batch * rows * cols;
  if (n <= 0) return;
  const unsigned parts = reduction_parts(n);
  const FactoredScratch s(V ? 0 : batch, static_cast<int>(parts));
  second_moment(F32Grad{g}, nullptr, R, C, V, batch, rows, cols, beta2t, one_minus_beta2t, s, parts,
                "adafactor_update");
  adafactor_apply_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
      w, g, R, C, V, s.rmean, rows, cols, n, s.denom, lr_t, decay_alpha, decay);
  check_launch("adafactor_update");
}

void adalomo_update(float* w, float* g, float* R, float* C, float* V, int64_t rows, int64_t cols,
                    float beta2t, float one_minus_beta2t, float lr_t, float decay,
                    bool apply_decay) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  const unsigned parts = reduction_parts(n);
  const FactoredScratch s(V ? 0 : 1, static_cast<int>(parts));
  // U over g: every element's U reads only its own g after the row and column sums are done.
  second_moment(F32Grad{g}, g, R, C, V, 1, rows, cols, beta2t, one_minus_beta2t, s, parts,
                "adalomo_update");
  adalomo_apply_kernel<<<grid_for(n), kThreads, 0, stream()>>>(w, g, n, s.denom, lr_t, decay,
                                                               apply_decay);
  check_launch("adalomo_update");
}

void lomo_update(float* p, const float* g, int64_t n, float lr, float weight_decay,
                 float grad_coef) {
  if (n <= 0) return;
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  lomo_kernel<<<grid_for(n), kThreads, 0, stream()>>>(p, g, n, lr, weight_decay, decay, grad_coef);
  check_launch("lomo_update");
}

void galore_adam_update(float* p, const float* g, float* m, float* v, int64_t n, float beta1,
                        float beta2, float eps, float neg_step, float decay_alpha, bool decay) {
  if (n <= 0) return;
  galore_adam_kernel<<<grid_for(n), kThreads, 0, stream()>>>(p, g, m, v, n, beta1, beta2, eps,
                                                             neg_step, decay_alpha, decay);
  check_launch("galore_adam_update");
}

void galore_adam_normalize(float* low, float* m, float* v, int64_t n, float beta1, float beta2,
                           float eps) {
  if (n <= 0) return;
  galore_normalize_kernel<<<grid_for(n), kThreads, 0, stream()>>>(low, m, v, n, beta1, beta2, eps);
  check_launch("galore_adam_normalize");
}

void galore_apply(float* p, const float* back, int64_t n, float neg_step, float scale,
                  float decay_alpha, bool decay) {
  if (n <= 0) return;
  galore_apply_kernel<<<grid_for(n), kThreads, 0, stream()>>>(p, back, n, neg_step, scale,
                                                              decay_alpha, decay);
  check_launch("galore_apply");
}

void adamw_update_bf16(uint16_t* p, const uint16_t* g, uint16_t* m, uint16_t* v, int64_t n,
                       float lr, float beta1, float beta2, float eps, float weight_decay, int64_t t,
                       uint64_t key, int64_t offset) {
  if (n <= 0) return;
  adamw_bf16_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
      p, g, m, v, n, kernels::adamw_scalars(lr, beta1, beta2, eps, weight_decay, t), key,
      kernels::rounding_substream(key, 1), offset);
  check_launch("adamw_update_bf16");
}

void adamw_update_master(uint16_t* p, const uint16_t* g, float* master, float* m, float* v,
                         int64_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, int64_t t, bool fp16) {
  if (n <= 0) return;
  adamw_master_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
      p, g, master, m, v, n, kernels::adamw_scalars(lr, beta1, beta2, eps, weight_decay, t), fp16);
  check_launch("adamw_update_master");
}

void sgd_update_bf16(uint16_t* p, const uint16_t* g, uint16_t* buf, int64_t n, float lr,
                     float momentum, float weight_decay, bool first, uint64_t key, int64_t offset) {
  if (n <= 0) return;
  sgd_bf16_kernel<<<grid_for(n), kThreads, 0, stream()>>>(p, g, buf, n, lr, momentum, weight_decay,
                                                          first, key, offset);
  check_launch("sgd_update_bf16");
}

void lomo_update_bf16(uint16_t* p, const uint16_t* g, int64_t n, float lr, float weight_decay,
                      float grad_coef, bool stochastic, uint64_t key) {
  if (n <= 0) return;
  const float decay = static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay);
  lomo_bf16_kernel<<<grid_for(n), kThreads, 0, stream()>>>(p, Bf16Grad{g, grad_coef}, n, lr,
                                                           weight_decay, decay, stochastic, key);
  check_launch("lomo_update_bf16");
}

void adalomo_update_bf16(uint16_t* w, const uint16_t* g, float* R, float* C, float* V, int64_t rows,
                         int64_t cols, float grad_coef, float beta2t, float one_minus_beta2t,
                         float lr_t, float decay, bool apply_decay, bool stochastic, uint64_t key) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  const unsigned parts = reduction_parts(n);
  const FactoredScratch s(V ? 0 : 1, static_cast<int>(parts));
  const Bf16Grad gk{g, grad_coef};
  second_moment(gk, nullptr, R, C, V, 1, rows, cols, beta2t, one_minus_beta2t, s, parts,
                "adalomo_update_bf16");
  adalomo_bf16_apply_kernel<<<grid_for(n), kThreads, 0, stream()>>>(
      w, gk, R, C, V, s.rmean, rows, cols, n, s.denom, lr_t, decay, apply_decay, stochastic, key);
  check_launch("adalomo_update_bf16");
}

}  // namespace

void register_optim(OpTable& t) {
  t.sgd_update = &sgd_update;
  t.lion_update = &lion_update;
  t.lion_bnb_update = &lion_bnb_update;
  t.lion_bnb_update_8bit = &lion_bnb_update_8bit;
  t.adamw_bnb_update = &adamw_bnb_update;
  t.adamw_bnb_update_8bit = &adamw_bnb_update_8bit;
  t.adafactor_update = &adafactor_update;
  t.adalomo_update = &adalomo_update;
  t.lomo_update = &lomo_update;
  t.galore_adam_update = &galore_adam_update;
  t.galore_adam_normalize = &galore_adam_normalize;
  t.galore_apply = &galore_apply;
  t.adamw_update_bf16 = &adamw_update_bf16;
  t.adamw_update_master = &adamw_update_master;
  t.sgd_update_bf16 = &sgd_update_bf16;
  t.lomo_update_bf16 = &lomo_update_bf16;
  t.adalomo_update_bf16 = &adalomo_update_bf16;
}

}  // namespace snug::cuda

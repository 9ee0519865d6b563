// The materialized attention of kernels/ops.inc (attention_forward_gqa/backward_gqa: the
// (B,NH,T,T) probabilities stored, dropout's mask and dropped probabilities too) and the
// fused-qkv entry points of it and of flash attention (kernels/fused_attention.inc).
//   forward      one warp per query row: scores into the att row, max, exp, sum, normalize,
//                then out = w v with the lanes over the head's dims;
//   backward     dv per key row (from the probabilities, before att is consumed), then dq per
//                query row (writing the score gradient into att: the contract lets backward
//                consume it), then dk per key row from those gradients. No atomics.
#include <cmath>

#include "core/error.h"
#include "kernels/cuda/attention_common.cuh"

namespace snug::cuda {

void check_device_attention_dims(const AttentionDims& d, const char* what) {
  AttentionDims host = d;
  host.pos = nullptr;  // on the device: not read here
  check_attention_dims(host, what);
  SNUG_CHECK(!d.pos || d.causal, what, ": position ids (per-document masks) need the causal mask");
}

namespace {

using namespace dev;

__global__ void attention_forward_kernel(float* out, float* att, const float* q, const float* k,
                                         const float* v, AttentionDims d, float scale,
                                         float inv_keep) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + warp;  // (b*NH + h)*T + t
  if (row >= d.B * d.NH * d.T) return;
  const int64_t hs = d.hs, T = d.T, t = row % T, h = (row / T) % d.NH, b = row / (T * d.NH);
  const int64_t kh = h / (d.NH / d.NKV);
  const int64_t lo = visible_from(d, b, t), n = key_end(d, t);
  float* a = att + row * T;
  const float* qr = head_row(q, d.ldq, d, b, t, h);
  float mx = -INFINITY;
  for (int64_t s = lo + lane; s < n; s += 32) {
    a[s] = dot(qr, head_row(k, d.ldk, d, b, s, kh), hs) * scale;
    mx = fmaxf(mx, a[s]);
  }
  mx = warp_max(mx);
  float sum = 0.0f;
  for (int64_t s = lo + lane; s < n; s += 32) {
    a[s] = expf(a[s] - mx);
    sum += a[s];
  }
  sum = warp_sum(sum);
  __syncwarp();  // below, lane s % 32 reads the a[s] that lane (s - lo) % 32 wrote
  const bool drop = d.dropout_p > 0;
  for (int64_t s = lane; s < T; s += 32) {
    const float p = s >= lo && s < n ? a[s] / sum : 0.0f;
    a[s] = p;
    if (drop) {
      const bool kept = keep(d, b, h, t, s);
      d.drop_mask[row * T + s] = kept ? 1 : 0;
      d.att_dropped[row * T + s] = kept ? p * inv_keep : 0.0f;
    }
  }
  __syncwarp();  // the row's weights, written by every lane, read by every lane
  const float* w = drop ? d.att_dropped + row * T : a;
  float* o = head_row(out, d.ldo, d, b, t, h);
  for (int64_t i = lane; i < hs; i += 32) {
    float acc = 0.0f;
    for (int64_t s = lo; s < n; ++s) acc += w[s] * head_row(v, d.ldv, d, b, s, kh)[i];
    o[i] = acc;
  }
}

// y row s of kv head kh (stride ldy) = sum over the query heads h reading kh and the query rows
// t seeing s of W[(b,h,t,s)] x[(b,t), head h] (stride ldx): dv from the probabilities and dout,
// dk from the score gradients and q.
__global__ void key_row_gather_kernel(float* y, int64_t ldy, const float* W, const float* x,
                                      int64_t ldx, AttentionDims d) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + warp;  // (b*NKV + kh)*T + s
  if (row >= d.B * d.NKV * d.T) return;
  const int64_t hs = d.hs, T = d.T, s = row % T, kh = (row / T) % d.NKV, b = row / (T * d.NKV);
  const int64_t rep = d.NH / d.NKV;
  const int64_t tb = query_begin(d, s), te = query_end(d, b, s);
  float* yr = head_row(y, ldy, d, b, s, kh);
  for (int64_t i = lane; i < hs; i += 32) {
    float acc = 0.0f;
    for (int64_t h = kh * rep; h < (kh + 1) * rep; ++h)
      for (int64_t t = tb; t < te; ++t)
        acc += W[((b * d.NH + h) * T + t) * T + s] * head_row(x, ldx, d, b, t, h)[i];
    yr[i] = acc;
  }
}

// dq of one query row; the row of att becomes the score gradients dpre (scale included).
__global__ void attention_dq_kernel(float* dq, const float* dout, const float* k, const float* v,
                                    float* att, AttentionDims d, float scale, float inv_keep) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + warp;  // (b*NH + h)*T + t
  if (row >= d.B * d.NH * d.T) return;
  const int64_t hs = d.hs, T = d.T, t = row % T, h = (row / T) % d.NH, b = row / (T * d.NH);
  const int64_t kh = h / (d.NH / d.NKV);
  const int64_t lo = visible_from(d, b, t), n = key_end(d, t);
  float* a = att + row * T;
  const float* dr = head_row(dout, d.ldo, d, b, t, h);
  const bool drop = d.dropout_p > 0;
  // datt[s] = dout . v[s], through the dropout mask.
  auto datt = [&](int64_t s) {
    const float x = dot(dr, head_row(v, d.ldv, d, b, s, kh), hs);
    return drop ? (d.drop_mask[row * T + s] != 0 ? x * inv_keep : 0.0f) : x;
  };
  float part = 0.0f;
  for (int64_t s = lo + lane; s < n; s += 32) part += a[s] * datt(s);
  const float S = warp_sum(part);
  float* o = head_row(dq, d.ldq, d, b, t, h);
  for (int64_t i = lane; i < hs; i += 32) o[i] = 0.0f;
  for (int64_t s0 = lo; s0 < n; s0 += 32) {
    const int64_t s = s0 + lane;
    float g = 0.0f;
    if (s < n) {
      g = a[s] * (datt(s) - S) * scale;
      a[s] = g;
    }
    const int cnt = n - s0 < 32 ? static_cast<int>(n - s0) : 32;
    for (int j = 0; j < cnt; ++j) {
      const float gj = __shfl_sync(kFull, g, j);
      const float* kr = head_row(k, d.ldk, d, b, s0 + j, kh);
      for (int64_t i = lane; i < hs; i += 32) o[i] += gj * kr[i];
    }
  }
}

float score_scale(const AttentionDims& d) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.hs)));
}
float inv_keep(const AttentionDims& d) {
  return static_cast<float>(1.0 / (1.0 - d.dropout_p));
}

void check_dropout_buffers(const AttentionDims& d) {
  SNUG_CHECK(d.dropout_p <= 0 || (d.drop_mask && d.att_dropped),
             "attention: dropout needs the mask and dropped-probability buffers");
}

void attention_forward_gqa(float* out, float* att, const float* q, const float* k, const float* v,
                           const AttentionDims& d) {
  check_device_attention_dims(d, "attention");
  check_dropout_buffers(d);
  const int64_t rows = d.B * d.NH * d.T;
  if (rows == 0) return;
  attention_forward_kernel<<<blocks_for_rows(rows), kThreads, 0, stream()>>>(
      out, att, q, k, v, d, score_scale(d), inv_keep(d));
  check_launch("attention_forward");
}

void attention_backward_gqa(float* dq, float* dk, float* dv, const float* dout, const float* q,
                            const float* k, const float* v, float* att, const AttentionDims& d) {
  check_device_attention_dims(d, "attention");
  check_dropout_buffers(d);
  if (d.B * d.NH * d.T == 0) return;
  const unsigned key_blocks = blocks_for_rows(d.B * d.NKV * d.T);
  const float* w = d.dropout_p > 0 ? d.att_dropped : att;  // what multiplied v
  key_row_gather_kernel<<<key_blocks, kThreads, 0, stream()>>>(dv, d.ldv, w, dout, d.ldo, d);
  check_launch("attention_backward (dv)");
  attention_dq_kernel<<<blocks_for_rows(d.B * d.NH * d.T), kThreads, 0, stream()>>>(
      dq, dout, k, v, att, d, score_scale(d), inv_keep(d));
  check_launch("attention_backward (dq)");
  key_row_gather_kernel<<<key_blocks, kThreads, 0, stream()>>>(dk, d.ldk, att, q, d.ldq, d);
  check_launch("attention_backward (dk)");
}

#include "kernels/fused_attention.inc"

// Element (n, h, part, i) of the interleaved (N, NH*3*hs) tensor is at index e = ((n*NH + h)*3 +
// part)*hs + i; of the separate (N, NH*hs) ones at (n*NH + h)*hs + i. One thread per e.
__global__ void qkv_interleave_kernel(float* q, float* k, float* v, float* qkv, int64_t total,
                                      int64_t hs, bool split) {
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < total;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = e % hs, part = (e / hs) % 3, nh = e / (3 * hs);
    float* sep = (part == 0 ? q : part == 1 ? k : v) + nh * hs + i;
    if (split)
      *sep = qkv[e];
    else
      qkv[e] = *sep;
  }
}

unsigned grid_for(int64_t n) {
  const unsigned b = blocks_for(n);
  return b > 4096 ? 4096 : b;
}

void qkv_interleaved_split(float* q, float* k, float* v, const float* qkv, int64_t N, int64_t NH,
                           int64_t hs) {
  const int64_t total = N * NH * 3 * hs;
  if (total <= 0) return;
  qkv_interleave_kernel<<<grid_for(total), 256, 0, stream()>>>(q, k, v, const_cast<float*>(qkv),
                                                               total, hs, true);
  check_launch("qkv_interleaved_split");
}

void qkv_interleaved_merge(float* dqkv, const float* dq, const float* dk, const float* dv,
                           int64_t N, int64_t NH, int64_t hs) {
  const int64_t total = N * NH * 3 * hs;
  if (total <= 0) return;
  qkv_interleave_kernel<<<grid_for(total), 256, 0, stream()>>>(
      const_cast<float*>(dq), const_cast<float*>(dk), const_cast<float*>(dv), dqkv, total, hs,
      false);
  check_launch("qkv_interleaved_merge");
}

}  // namespace

void register_attention(OpTable& t) {
  t.attention_forward_gqa = &attention_forward_gqa;
  t.attention_backward_gqa = &attention_backward_gqa;
  t.attention_forward = &attention_forward;
  t.attention_backward = &attention_backward;
  t.flash_attention_forward = &flash_attention_forward;
  t.flash_attention_backward = &flash_attention_backward;
  t.qkv_interleaved_split = &qkv_interleaved_split;
  t.qkv_interleaved_merge = &qkv_interleaved_merge;
}

}  // namespace snug::cuda

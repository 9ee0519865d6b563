// Memory-efficient attention of kernels/flash_ops.inc (general form: strided q, k, v, GQA, causal
// or bidirectional, packed documents, sliding window, dropout on the probabilities). Nothing
// T x T is stored: the forward keeps the log-sum-exp per query row, the backward recomputes the
// probabilities p = exp(s - lse) from it.
//   forward      one warp per query row: online softmax in fp32 over keys 32 at a time;
//   backward dq  one warp per query row, D = dout . out, ds = p (dp m - D) / sqrt(hs);
//   backward dkv one warp per key row of a kv head, over the query rows of every query head that
//                reads it (so no float atomics: deterministic).
// Straightforward rather than fast (no tensor cores, K/V read from L2): correctness first. These
// are the "simple" variant of kernels/cuda/flash_variant.h; the default, "tiled-pairs", is
// flash_tiled.cu, which hands the cases outside it back to these. A --bf16 run's calls
// (AttentionDims::bf16_operands) go to cuDNN first where the build has it
// (kernels/cuda/cudnn_attention.h).
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "core/error.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/flash_variant.h"

namespace snug::cuda {

namespace {

using namespace dev;

// Each warp's shared rows are padded_hs(hs) floats apart (attention_common.cuh): ptxas reads a
// row's tail with wide loads (with hs % 4 == 1 an LDS.64 took qs[hs-1] and qs[hs], acc's first
// float, which lane 0 writes, and threw the second away: racecheck's warp-level hazards), and
// with the padding such a load stays in its own row.

// Shared memory per warp: q row and the output accumulator (hs floats each, padded).
__global__ void flash_forward_kernel(float* out, float* lse, const float* q, const float* k,
                                     const float* v, AttentionDims d, float scale) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + warp;  // (b*NH + h)*T + t
  if (row >= d.B * d.NH * d.T) return;
  const int64_t hs = d.hs, t = row % d.T, h = (row / d.T) % d.NH, b = row / (d.T * d.NH);
  const int64_t kh = h / (d.NH / d.NKV);
  const int64_t w = padded_hs(hs);
  float* qs = smem + warp * 2 * w;
  float* acc = qs + w;
  const float* qr = head_row(q, d.ldq, d, b, t, h);
  for (int64_t i = lane; i < hs; i += 32) {
    qs[i] = qr[i];
    acc[i] = 0.0f;
  }
  __syncwarp();
  const int64_t lo = visible_from(d, b, t), n = key_end(d, t);
  float m = -INFINITY, l = 0.0f;
  for (int64_t s0 = lo; s0 < n; s0 += 32) {
    const int64_t s = s0 + lane;
    float sc = -INFINITY;
    if (s < n) sc = dot(qs, head_row(k, d.ldk, d, b, s, kh), hs) * scale;
    const float m_new = fmaxf(m, warp_max(sc));
    const float corr = expf(m - m_new);  // 0 on the first chunk (m = -inf)
    const float p = s < n ? expf(sc - m_new) : 0.0f;
    l = l * corr + warp_sum(p);
    const float pv = s < n ? p * keep_scale(d, b, h, t, s) : 0.0f;
    for (int64_t i = lane; i < hs; i += 32) acc[i] *= corr;
    const int cnt = n - s0 < 32 ? static_cast<int>(n - s0) : 32;
    for (int j = 0; j < cnt; ++j) {
      const float pj = __shfl_sync(kFull, pv, j);
      const float* vr = head_row(v, d.ldv, d, b, s0 + j, kh);
      for (int64_t i = lane; i < hs; i += 32) acc[i] += pj * vr[i];
    }
    m = m_new;
  }
  float* o = head_row(out, d.ldo, d, b, t, h);
  for (int64_t i = lane; i < hs; i += 32) o[i] = acc[i] / l;
  if (lane == 0) lse[row] = m + logf(l);
}

// dq of one query row. Shared memory per warp: q row, dout row, dq accumulator.
__global__ void flash_dq_kernel(float* dq, const float* dout, const float* q, const float* k,
                                const float* v, const float* out, const float* lse, AttentionDims d,
                                float scale) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + warp;  // (b*NH + h)*T + t
  if (row >= d.B * d.NH * d.T) return;
  const int64_t hs = d.hs, t = row % d.T, h = (row / d.T) % d.NH, b = row / (d.T * d.NH);
  const int64_t kh = h / (d.NH / d.NKV);
  const int64_t w = padded_hs(hs);
  float* qs = smem + warp * 3 * w;
  float* ds = qs + w;
  float* acc = ds + w;
  const float* qr = head_row(q, d.ldq, d, b, t, h);
  const float* dr = head_row(dout, d.ldo, d, b, t, h);
  const float* orow = head_row(out, d.ldo, d, b, t, h);
  float part = 0.0f;
  for (int64_t i = lane; i < hs; i += 32) {
    qs[i] = qr[i];
    ds[i] = dr[i];
    acc[i] = 0.0f;
    part += dr[i] * orow[i];
  }
  const float D = warp_sum(part);  // sum_s p m (dout . v_s) = dout . out, dropout or not
  __syncwarp();
  const float l = lse[row];
  const int64_t lo = visible_from(d, b, t), n = key_end(d, t);
  for (int64_t s0 = lo; s0 < n; s0 += 32) {
    const int64_t s = s0 + lane;
    float g = 0.0f;
    if (s < n) {
      const float p = expf(dot(qs, head_row(k, d.ldk, d, b, s, kh), hs) * scale - l);
      const float dp = dot(ds, head_row(v, d.ldv, d, b, s, kh), hs);
      g = p * (dp * keep_scale(d, b, h, t, s) - D) * scale;  // gradient of the raw score q . k
    }
    const int cnt = n - s0 < 32 ? static_cast<int>(n - s0) : 32;
    for (int j = 0; j < cnt; ++j) {
      const float gj = __shfl_sync(kFull, g, j);
      const float* kr = head_row(k, d.ldk, d, b, s0 + j, kh);
      for (int64_t i = lane; i < hs; i += 32) acc[i] += gj * kr[i];
    }
  }
  float* o = head_row(dq, d.ldq, d, b, t, h);
  for (int64_t i = lane; i < hs; i += 32) o[i] = acc[i];
}

// dk, dv of one key row s of kv head kh, summed over the query heads that read kh and the query
// rows that see s. Shared memory per warp: k row, v row, dk and dv accumulators.
__global__ void flash_dkv_kernel(float* dk, float* dv, const float* dout, const float* q,
                                 const float* k, const float* v, const float* out, const float* lse,
                                 AttentionDims d, float scale) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t{blockIdx.x} * kWarpsPerBlock + warp;  // (b*NKV + kh)*T + s
  if (row >= d.B * d.NKV * d.T) return;
  const int64_t hs = d.hs, s = row % d.T, kh = (row / d.T) % d.NKV, b = row / (d.T * d.NKV);
  const int64_t rep = d.NH / d.NKV;
  const int64_t w = padded_hs(hs);
  float* ks = smem + warp * 4 * w;
  float* vs = ks + w;
  float* gk = vs + w;
  float* gv = gk + w;
  const float* kr = head_row(k, d.ldk, d, b, s, kh);
  const float* vr = head_row(v, d.ldv, d, b, s, kh);
  for (int64_t i = lane; i < hs; i += 32) {
    ks[i] = kr[i];
    vs[i] = vr[i];
    gk[i] = 0.0f;
    gv[i] = 0.0f;
  }
  __syncwarp();
  const int64_t tb = query_begin(d, s), te = query_end(d, b, s);
  for (int64_t h = kh * rep; h < (kh + 1) * rep; ++h)
    for (int64_t t0 = tb; t0 < te; t0 += 32) {
      const int64_t t = t0 + lane;
      float pv = 0.0f, g = 0.0f;
      if (t < te) {
        const float* qr = head_row(q, d.ldq, d, b, t, h);
        const float* dr = head_row(dout, d.ldo, d, b, t, h);
        const float D = dot(dr, head_row(out, d.ldo, d, b, t, h), hs);
        const float p = expf(dot(qr, ks, hs) * scale - lse[(b * d.NH + h) * d.T + t]);
        const float mk = keep_scale(d, b, h, t, s);
        pv = p * mk;
        g = p * (dot(dr, vs, hs) * mk - D) * scale;
      }
      const int cnt = te - t0 < 32 ? static_cast<int>(te - t0) : 32;
      for (int j = 0; j < cnt; ++j) {
        const float pj = __shfl_sync(kFull, pv, j), gj = __shfl_sync(kFull, g, j);
        const float* qj = head_row(q, d.ldq, d, b, t0 + j, h);
        const float* dj = head_row(dout, d.ldo, d, b, t0 + j, h);
        for (int64_t i = lane; i < hs; i += 32) {
          gv[i] += pj * dj[i];
          gk[i] += gj * qj[i];
        }
      }
    }
  float* ok = head_row(dk, d.ldk, d, b, s, kh);
  float* ov = head_row(dv, d.ldv, d, b, s, kh);
  for (int64_t i = lane; i < hs; i += 32) {
    ok[i] = gk[i];
    ov[i] = gv[i];
  }
}

size_t smem_bytes(int64_t rows_per_warp, int64_t hs) {
  const size_t bytes =
      static_cast<size_t>(kWarpsPerBlock * rows_per_warp * padded_hs(hs)) * sizeof(float);
  SNUG_CHECK(bytes <= 48 * 1024, "flash_attention (CUDA): head size ", hs,
             " needs more shared memory than a block has (", bytes, " bytes)");
  return bytes;
}

float score_scale(const AttentionDims& d) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(d.hs)));
}

// flash_variant.h's names, in the order of Variant.
enum class Variant { tiled, tiled_pairs, simple };
constexpr const char* kVariantNames[] = {"tiled", "tiled-pairs", "simple"};

Variant parse_variant(const char* name, const char* where) {
  for (size_t i = 0; i < std::size(kVariantNames); ++i)
    if (std::strcmp(name, kVariantNames[i]) == 0) return static_cast<Variant>(i);
  std::string known;
  for (const char* n : kVariantNames) known += std::string(known.empty() ? "" : ", ") + n;
  throw Error(std::string(where) + ": unknown flash attention variant '" + name + "' (" + known +
              ")");
}

Variant& variant() {
  static Variant v = [] {
    const char* e = std::getenv("SNUG_CUDA_FLASH");
    return e == nullptr || *e == '\0' ? Variant::tiled_pairs : parse_variant(e, "SNUG_CUDA_FLASH");
  }();
  return v;
}

// The tiled kernels' thread layout (flash_lanes.h) of the variant in force.
FlashLanes lanes() {
  return variant() == Variant::tiled_pairs ? FlashLanes::pairs : FlashLanes::rows;
}

}  // namespace

void set_flash_variant(const char* name) {
  variant() = parse_variant(name, "set_flash_variant");
}

const char* flash_variant() {
  return kVariantNames[static_cast<int>(variant())];
}

void flash_attention_forward_gqa(float* out, float* lse, const float* q, const float* k,
                                 const float* v, const AttentionDims& d) {
  check_device_attention_dims(d, "flash_attention");
  const int64_t rows = d.B * d.NH * d.T;
  if (rows == 0) return;
  if (d.bf16_operands && cudnn_attention_forward(out, lse, q, k, v, d)) return;
  if (variant() != Variant::simple && tiled_flash_forward(out, lse, q, k, v, d, lanes())) return;
  flash_forward_kernel<<<blocks_for_rows(rows), kThreads, smem_bytes(2, d.hs), stream()>>>(
      out, lse, q, k, v, d, score_scale(d));
  check_launch("flash_attention_forward");
}

// The tiled variant takes B*NH*T floats of device scratch for the call (D = dout . out per row,
// cuda::Scratch: device memory outside the pool, 0.75 MiB at GPT-2's B=16, T=1024).
void flash_attention_backward_gqa(float* dq, float* dk, float* dv, const float* dout,
                                  const float* q, const float* k, const float* v, const float* out,
                                  const float* lse, const AttentionDims& d) {
  check_device_attention_dims(d, "flash_attention");
  const int64_t rows = d.B * d.NH * d.T;
  if (rows == 0) return;
  if (d.bf16_operands && cudnn_attention_backward(dq, dk, dv, dout, q, k, v, out, lse, d)) return;
  if (variant() != Variant::simple &&
      tiled_flash_backward(dq, dk, dv, dout, q, k, v, out, lse, d, lanes()))
    return;
  flash_dq_kernel<<<blocks_for_rows(rows), kThreads, smem_bytes(3, d.hs), stream()>>>(
      dq, dout, q, k, v, out, lse, d, score_scale(d));
  check_launch("flash_attention_backward (dq)");
  flash_dkv_kernel<<<blocks_for_rows(d.B * d.NKV * d.T), kThreads, smem_bytes(4, d.hs), stream()>>>(
      dk, dv, dout, q, k, v, out, lse, d, score_scale(d));
  check_launch("flash_attention_backward (dk, dv)");
}

void register_flash(OpTable& t) {
  t.flash_attention_forward_gqa = &flash_attention_forward_gqa;
  t.flash_attention_backward_gqa = &flash_attention_backward_gqa;
}

}  // namespace snug::cuda

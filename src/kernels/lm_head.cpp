// Chunked LM head + softmax cross-entropy (see lm_head.h): per chunk of rows, one GEMM for the
// logits into scratch, the softmax rows in parallel (turned into dlogits in place when the
// backward is asked for), then the two backward GEMMs on the same chunk.
#include "kernels/lm_head.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "kernels/arg_checks.h"
#include "kernels/kernels.h"
#include "kernels/row_softmax.h"

namespace snug::kernels {

int64_t lm_head_default_chunk(int64_t N, int64_t V, int64_t budget_floats) {
  if (N <= 1) return 1;
  const int64_t max_rows = std::clamp<int64_t>(budget_floats / std::max<int64_t>(V, 1), 1, N);
  const int64_t chunks = (N + max_rows - 1) / max_rows;
  return (N + chunks - 1) / chunks;  // <= max_rows since chunks >= N / max_rows
}

int64_t lm_head_scratch_floats(int64_t N, int64_t V, int64_t chunk) {
  if (N <= 0 || V <= 0) return 0;
  return std::min(N, std::max<int64_t>(chunk, 1)) * V;
}

namespace {

// One GEMM signature for both operand types: fp32 (gemm_f32) or bf16 (gemm_bf16).
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const uint16_t* A,
          int64_t lda, const uint16_t* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm_bf16(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// The dlogits(m,V) in scratch as the backward GEMMs' operand: itself in fp32; for bf16, rounded
// to bf16 into a dense (m,V) layout over the front half of the same buffer (no memory beyond
// the scratch). Dense matters: oneDNN's AMX/brgemm matmul takes only dense operands and sends
// a strided one to its slower gemm:jit (measured 2x slower for these two GEMMs). Each row is
// first converted over the front half of its own fp32 row (rows in parallel, each through a
// thread-local buffer of V values), then moved down to row i of the dense layout. Row i's
// destination bytes [2iV, 2iV + 2V) overlap only the converted values of row i/2, so rows
// [2^k, 2^(k+1)) move together once the rows below 2^k have moved.
template <typename T>
const T* dlogits_operand(float* scratch, int64_t m, int64_t V) {
  if constexpr (sizeof(T) == 4) {
    return scratch;
  } else {
    auto* bytes = reinterpret_cast<unsigned char*>(scratch);
    const auto row_bytes = static_cast<size_t>(V) * 2;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
      thread_local std::vector<uint16_t> row;
      row.resize(static_cast<size_t>(V));
      convert(scratch + i * V, DType::f32, row.data(), DType::bf16, static_cast<size_t>(V));
      std::memcpy(bytes + 4 * i * V, row.data(), row_bytes);
    }
    for (int64_t lo = 1; lo < m; lo *= 2) {
      const int64_t hi = std::min(m, 2 * lo);
#pragma omp parallel for schedule(static)
      for (int64_t i = lo; i < hi; ++i)
        std::memmove(bytes + 2 * i * V, bytes + 4 * i * V, row_bytes);
    }
    return reinterpret_cast<const uint16_t*>(scratch);
  }
}

// Narrowest vocabulary slice worth a GEMM of its own in the forward-only path.
constexpr int64_t kMinVocabSlice = 256;

// Forward only, all N rows at once over vocabulary slices of Vb columns (scratch N*Vb floats):
// the GEMMs are (N x Vb x C), which oneDNN runs faster than (chunk x V x C) ones (it re-packs
// wte for every row chunk), and the log-sum-exp is accumulated online per row. Per-row state
// lives in thread-local buffers of 16*N bytes.
template <typename T>
double forward_vocab_sliced(float* losses, const T* lnf, const T* wte, const int32_t* targets,
                            int64_t N, int64_t C, int64_t V, float* scratch, int64_t Vb) {
  thread_local std::vector<float> run_max, target_logit;
  thread_local std::vector<double> run_sum;
  const auto n = static_cast<size_t>(N);
  run_max.assign(n, -INFINITY);
  run_sum.assign(n, 0.0);
  target_logit.assign(n, 0.0f);
  // Raw pointers: inside the parallel region a thread_local name would be each worker's own.
  float* rmax = run_max.data();
  double* rsum = run_sum.data();
  float* tlogit = target_logit.data();
  for (int64_t v0 = 0; v0 < V; v0 += Vb) {
    const int64_t vb = std::min(Vb, V - v0);
    // logits[:, v0:v0+vb] = lnf @ wte[v0:v0+vb]^T
    gemm(false, true, N, vb, C, 1.0f, lnf, C, wte + v0 * C, C, 0.0f, scratch, vb);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < N; ++i) {
      const int32_t tgt = targets[i];
      if (tgt < 0) continue;
      const float* x = scratch + i * vb;
      const float maxv = detail::row_max(x, vb);
      const float sum = detail::sum_exp_shifted(x, vb, maxv);
      if (tgt >= v0 && tgt < v0 + vb) tlogit[i] = x[tgt - v0];
      const float m_old = rmax[i];
      const float m_new = std::max(m_old, maxv);
      rsum[i] = rsum[i] * std::exp(static_cast<double>(m_old) - m_new) +
                static_cast<double>(sum) * std::exp(static_cast<double>(maxv) - m_new);
      rmax[i] = m_new;
    }
  }
  double total = 0.0;
  for (int64_t i = 0; i < N; ++i) {
    const float loss =
        targets[i] >= 0
            ? static_cast<float>(std::log(rsum[i]) + (static_cast<double>(rmax[i]) - tlogit[i]))
            : 0.0f;
    if (losses) losses[i] = loss;
    total += loss;
  }
  return total;
}

// lm_head_xent on checked arguments (kernels/lm_head_entry.inc).
template <typename T>
double lm_head_xent_impl(float* losses, float* dlnf, float* dwte, const T* lnf, const T* wte,
                         const int32_t* targets, int64_t N, int64_t C, int64_t V, float scale,
                         float* scratch, int64_t chunk) {
  if (N == 0) return 0.0;
  chunk = std::min(chunk, N);
  const bool backward = dlnf != nullptr || dwte != nullptr;
  if (!backward && chunk < N) {
    // Several row chunks: slice the vocabulary instead, same scratch (N*Vb <= chunk*V floats).
    const int64_t Vb = chunk * V / N;
    if (Vb >= kMinVocabSlice)
      return forward_vocab_sliced(losses, lnf, wte, targets, N, C, V, scratch, Vb);
  }

  // Per-row losses of the current chunk when the caller does not want them (small, bounded).
  thread_local std::vector<float> own_losses;
  if (!losses && own_losses.size() < static_cast<size_t>(chunk))
    own_losses.resize(static_cast<size_t>(chunk));

  double total = 0.0;
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    const int64_t m = std::min(chunk, N - r0);
    const int32_t* tg = targets + r0;
    float* lo = losses ? losses + r0 : own_losses.data();
    int64_t valid = 0;
    for (int64_t i = 0; i < m; ++i) valid += tg[i] >= 0 ? 1 : 0;
    if (valid == 0) {  // nothing to learn from these rows: skip the GEMMs
      std::fill(lo, lo + m, 0.0f);
      if (dlnf) std::fill(dlnf + r0 * C, dlnf + (r0 + m) * C, 0.0f);
      continue;
    }

    // logits(m,V) = lnf[r0:r0+m] @ wte^T
    gemm(false, true, m, V, C, 1.0f, lnf + r0 * C, C, wte, C, 0.0f, scratch, V);

#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
      float* x = scratch + i * V;
      const int32_t tgt = tg[i];
      if (tgt < 0) {
        lo[i] = 0.0f;
        if (backward) {
#pragma omp simd
          for (int64_t j = 0; j < V; ++j) x[j] = 0.0f;
        }
        continue;
      }
      const float maxv = detail::row_max(x, V);
      const float shifted_target = x[tgt] - maxv;
      float sum;
      if (backward) {
        // dlogits = (softmax - onehot) * scale, in place
        sum = detail::exp_shifted(x, x, V, maxv);
        detail::scale_row(x, V, scale / sum);
        x[tgt] -= scale;
      } else {
        sum = detail::sum_exp_shifted(x, V, maxv);
      }
      lo[i] = detail::xent_from_sum(sum, shifted_target);
    }
    // Serial sum in row order: the returned loss is reproducible.
    for (int64_t i = 0; i < m; ++i) total += lo[i];

    if (!backward) continue;
    // dwte(V,C) += dlogits^T @ lnf[r0:r0+m] first, then dlnf[r0:r0+m] = dlogits @ wte: this
    // order lets dlnf alias lnf (those rows of lnf are not read again).
    const T* dlogits = dlogits_operand<T>(scratch, m, V);
    if (dwte) gemm(true, false, V, C, m, 1.0f, dlogits, V, lnf + r0 * C, C, 1.0f, dwte, C);
    if (dlnf) gemm(false, false, m, C, V, 1.0f, dlogits, V, wte, C, 0.0f, dlnf + r0 * C, C);
  }
  return total;
}

}  // namespace

#include "kernels/lm_head_entry.inc"

}  // namespace snug::kernels

// Chunked language-model head + softmax cross-entropy: the (N,V) logits are never materialized
// whole. Rows are processed `chunk` at a time through a caller-provided scratch of chunk*V
// floats (for GPT-2 124M at B=4, T=512 the full logits would be 2048*50257*4 B = 411 MB; the
// default chunk keeps scratch at <= 32 MiB).
//
// Two implementations with the same signature, as in kernels/kernels.h:
//   snug::kernels::*  fast: gemm_f32 (oneDNN) per chunk, softmax rows in parallel with OpenMP;
//   snug::ref::*      plain single-threaded loops in double, the reference for the tests.
//
// Shapes: lnf(N,C) the final hidden states, wte(V,C) the (tied) output embedding, so
// logits(N,V) = lnf @ wte^T; targets(N), rows with target < 0 (e.g. -100) are ignored.
//
// Intended use (one extra N*V*C GEMM per step, the price of not saving the logits):
//   forward:  lm_head_xent(losses, nullptr, nullptr, lnf, wte, targets, ...)  -> loss only,
//             nothing saved but lnf;
//   backward: lm_head_xent(losses, dlnf, dwte, lnf, wte, targets, ..., scale, ...) recomputes
//             each logits chunk and turns it into dlogits in place while it is still in scratch.
// FLOPs per call: 2*N*V*C for the logits, plus 2*N*V*C for dlnf and 2*N*V*C for dwte when
// asked, so forward + backward costs 4 GEMMs of that size instead of the unchunked 3.
#pragma once

#include <cstdint>

namespace snug {

namespace kernels {

// Chunked LM head + cross-entropy, optionally with its backward in the same pass.
//   losses(N) = -log softmax(lnf_i @ wte^T)[target_i], 0 for rows with target < 0; losses may be
//   null (then only the sum is returned). Returns the sum of losses over valid rows in double,
//   summed serially in row order.
// Backward (runs when dlnf or dwte is non-null; each null one is skipped):
//   dlogits = (softmax - onehot(target)) * scale for valid rows, 0 for ignored rows
//   dlnf(N,C)  = dlogits @ wte          OVERWRITE (ignored rows get 0);
//   dwte(V,C) += dlogits^T @ lnf        ACCUMULATE.
//   scale is per token, e.g. loss_scale / number of valid targets.
// Forward only (dlnf and dwte null) with chunk < N: when the same scratch holds all N rows for a
// vocabulary slice of Vb = chunk*V/N >= 256 columns, the vocabulary is sliced instead of the rows
// (GEMMs of N x Vb x C, log-sum-exp accumulated online; per-row state in thread-local buffers of
// 16*N bytes): same results, fewer re-reads of wte. The backward always goes by row chunks.
// scratch must hold lm_head_scratch_floats(N, V, chunk) = min(N, chunk) * V floats; its contents
// on entry do not matter and are garbage afterwards. chunk >= 1 (values > N are clamped to N).
// Throws snug::Error for a target >= V or chunk < 1.
double lm_head_xent(float* losses, float* dlnf, float* dwte, const float* lnf, const float* wte,
                    const int32_t* targets, int64_t N, int64_t C, int64_t V, float scale,
                    float* scratch, int64_t chunk);
// lm_head_xent with bf16 lnf and wte (bit patterns), fp32 logits and accumulation through
// gemm_bf16; the dlogits are rounded to bf16 (nearest even) before the two backward products,
// as a bf16 GEMM's input (torch.autocast does the same). A chunk's bf16 dlogits are packed
// densely over the front half of its own fp32 scratch: no extra memory. dlnf must not alias lnf.
double lm_head_xent_bf16(float* losses, float* dlnf, float* dwte, const uint16_t* lnf,
                         const uint16_t* wte, const int32_t* targets, int64_t N, int64_t C,
                         int64_t V, float scale, float* scratch, int64_t chunk);

}  // namespace kernels

namespace ref {

// Same contract as kernels::lm_head_xent, with plain loops and double accumulation.
double lm_head_xent(float* losses, float* dlnf, float* dwte, const float* lnf, const float* wte,
                    const int32_t* targets, int64_t N, int64_t C, int64_t V, float scale,
                    float* scratch, int64_t chunk);
// Same contract as kernels::lm_head_xent_bf16 (plain loops, double sums of exact products).
double lm_head_xent_bf16(float* losses, float* dlnf, float* dwte, const uint16_t* lnf,
                         const uint16_t* wte, const int32_t* targets, int64_t N, int64_t C,
                         int64_t V, float scale, float* scratch, int64_t chunk);

}  // namespace ref

namespace kernels {

// Default rows per chunk: the largest count whose scratch fits kLmHeadScratchBudgetFloats
// (8 Mi floats = 32 MiB), at least 1 and at most N, then evened out over the chunks it implies
// (chunk = ceil(N / ceil(N / max_rows))) so the last chunk is not a small remainder.
// E.g. N=2048, V=50257: max_rows = 166, 13 chunks of 158 rows, scratch 31.8 MB.
inline constexpr int64_t kLmHeadScratchBudgetFloats = int64_t{8} << 20;
int64_t lm_head_default_chunk(int64_t N, int64_t V);
// Floats of scratch lm_head_xent needs for these sizes: min(N, chunk) * V (0 for N <= 0).
int64_t lm_head_scratch_floats(int64_t N, int64_t V, int64_t chunk);

}  // namespace kernels

}  // namespace snug

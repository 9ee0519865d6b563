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

// Declares each SNUG_OP entry as a function of the enclosing namespace.
#define SNUG_OP(ret, name, params) ret name params;
namespace kernels {
#include "kernels/lm_head_ops.inc"
}  // namespace kernels

namespace ref {
#include "kernels/lm_head_ops.inc"
}  // namespace ref
#undef SNUG_OP

namespace kernels {

// Default rows per chunk: the largest count whose scratch fits the budget (on the host
// kLmHeadScratchBudgetFloats, 8 Mi floats = 32 MiB), at least 1 and at most N, then evened out over
// the chunks it implies (chunk = ceil(N / ceil(N / max_rows))) so the last chunk is not a small
// remainder. E.g. N=2048, V=50257: max_rows = 166, 13 chunks of 158 rows, scratch 31.8 MB.
inline constexpr int64_t kLmHeadScratchBudgetFloats = int64_t{8} << 20;
// On a GPU the chunk's three GEMMs are what a step waits for: chunks of 158 rows ran
// gpt2-124m's head (B=16, T=1024) at half the rate of one full-logits GEMM (an H200, 2026-11-27:
// 130 ms a step against PyTorch's 70 ms), the dW product with K = 158 rows re-reading and
// re-writing all of dW each chunk. 128 Mi floats (512 MiB) give chunks of thousands of rows
// there (7 of 2341 rows for N=16384, V=50257), at a 16th of full logits' memory.
inline constexpr int64_t kLmHeadGpuScratchBudgetFloats = int64_t{128} << 20;
// budget_floats: kLmHeadScratchBudgetFloats on the host, kLmHeadGpuScratchBudgetFloats on a GPU
// (nn::RunContext::lm_head_budget_floats).
int64_t lm_head_default_chunk(int64_t N, int64_t V,
                              int64_t budget_floats = kLmHeadScratchBudgetFloats);
// Floats of scratch lm_head_xent needs for these sizes: min(N, chunk) * V (0 for N <= 0).
int64_t lm_head_scratch_floats(int64_t N, int64_t V, int64_t chunk);

}  // namespace kernels

}  // namespace snug

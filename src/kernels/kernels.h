// CPU kernels of the engine, fp32, row-major, on raw pointers.
//
// Two implementations of every op with the same signature:
//   snug::kernels::*  the fast one (GEMM through oneDNN, OpenMP, vectorizable loops);
//   snug::ref::*      a plain single-threaded loop, the reference that tests hold the fast one to.
// Conventions (dimension letters: B batch, T time, C channels, NH heads, hs = C/NH head size,
// V vocabulary, N = rows = B*T):
//   - Parameter gradients (dw, db, dwte, ...) ACCUMULATE (+=): gradient accumulation is free.
//   - Input gradients OVERWRITE (=) unless the comment says "+=" (layernorm_backward accumulates
//     into dinp because its input is the residual stream, whose gradient is a sum).
//   - A nullptr output gradient means "not needed": skip that work.
//   - Kernels never allocate tracked memory. Any scratch they use internally is small and
//     bounded (documented per kernel) and lives in thread-local buffers.
#pragma once

#include <cstdint>

#include "kernels/attention_dims.h"

namespace snug {

// Declares each SNUG_OP entry of the op lists as a function of the enclosing namespace.
#define SNUG_OP(ret, name, params) ret name params;

namespace kernels {
#include "kernels/ops.inc"
// Name and version of the GEMM library, e.g. "oneDNN 2.6.3 (dnnl_sgemm)".
const char* gemm_library();
// C(M,N) = beta * C, the whole GEMM when K == 0 (beta == 0: C is write-only). For the GEMMs.
void scale_c_for_empty_k(int64_t M, int64_t N, float beta, float* C, int64_t ldc);
}  // namespace kernels

namespace ref {
#include "kernels/ops.inc"
}  // namespace ref

#undef SNUG_OP

}  // namespace snug

// The per-device op table: one function pointer per kernel op, generated from the op lists
// (kernels/ops.inc, flash_ops.inc, lm_head_ops.inc, optim_ops.inc, quant_ops.inc,
// kv_cache_ops.inc), so an op added there is in every table.
//
// Why: model and block code (src/nn), the optimizers (src/optim) and the quantized weights
// (src/quant) reach kernels only through `dev.ops()` (core/device.h) and never ask which device
// they run on. Three tables exist:
//   fast  snug::kernels (oneDNN GEMM, OpenMP), the table of a cpu Device;
//   ref   snug::ref, the plain loops, for tests (a cpu Device built with &ref_op_table());
//   meta  every op does nothing and returns 0: a meta Device's tensors have no bytes, so its
//         table runs only the shape and allocation code around the calls (the pool still counts
//         every Tensor the caller allocates), which is how a dry run equals a real run to the
//         byte without an `if (real)` in the caller.
// A CUDA backend would be one more table (and a DeviceKind with its own pool backing).
//
// Meta ops skip the argument checks the cpu kernels make (e.g. C % NH == 0): callers validate
// their configuration themselves, before any op runs, so both devices refuse the same input.
#pragma once

#include "kernels/flash_attention.h"
#include "kernels/kernels.h"
#include "kernels/kv_cache_ops.h"
#include "kernels/lm_head.h"
#include "kernels/optim_ops.h"
#include "kernels/quant_ops.h"

namespace snug {

struct OpTable {
  const char* impl;  // "fast", "ref" or "meta"
#define SNUG_OP(ret, name, params) ret(*name) params;
#include "kernels/flash_ops.inc"
#include "kernels/kv_cache_ops.inc"
#include "kernels/lm_head_ops.inc"
#include "kernels/ops.inc"
#include "kernels/optim_ops.inc"
#include "kernels/quant_ops.inc"
#undef SNUG_OP
};

const OpTable& fast_op_table();  // snug::kernels
const OpTable& ref_op_table();   // snug::ref
const OpTable& meta_op_table();  // no-ops returning 0

}  // namespace snug

// The per-device op table: one function pointer per kernel op, generated from the op lists
// (kernels/all_ops.inc: ops.inc, flash_ops.inc, lm_head_ops.inc, optim_ops.inc, quant_ops.inc,
// kv_cache_ops.inc), so an op added there is in every table.
//
// Why: model and block code (src/nn), the optimizers (src/optim) and the quantized weights
// (src/quant) reach kernels only through `dev.ops()` (core/device.h) and never ask which device
// they run on. Three tables exist:
//   fast  snug::kernels (oneDNN GEMM, OpenMP), the table of the cpu backend (kernels/backends.h);
//   ref   snug::ref, the plain loops, for tests (a cpu Device built with &ref_op_table());
//   meta  every op does nothing and returns 0: a meta Device's tensors have no bytes, so its
//         table runs only the shape and allocation code around the calls (the pool still counts
//         every Tensor the caller allocates), which is how a dry run equals a real run to the
//         byte without an `if (real)` in the caller.
// A CUDA backend would be one more table, in one more Backend (kernels/backends.h).
//
// Host-only ops: a few ops work on host memory whatever the device (GaLore's projector runs
// LAPACK; the quantizer reads the loader's host staging). Their list entries say SNUG_HOST_OP
// instead of SNUG_OP; every table's entry is then a host function (meta's a no-op) and callers
// hand them host pointers, staging device tensors through core/host_staging.h (free on cpu).
// A backend's table must have an entry for every other op: tests/kernels/op_table_test.cpp fails
// on an op that has neither an entry nor the host-only mark.
//
// Meta ops skip the argument checks the cpu kernels make (e.g. C % NH == 0): callers validate
// their configuration themselves, before any op runs, so both devices refuse the same input.
#pragma once

#include <string>
#include <vector>

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
#include "kernels/all_ops.inc"
#undef SNUG_OP
};

const OpTable& fast_op_table();  // snug::kernels
const OpTable& ref_op_table();   // snug::ref
const OpTable& meta_op_table();  // no-ops returning 0

// The names of the host-only ops (SNUG_HOST_OP entries), in list order.
const std::vector<std::string>& host_only_ops();

}  // namespace snug

// The KV cache's kernels (list and contracts: kernels/kv_cache_ops.inc), reached through the op
// table so that nn/attention.cpp's cached forward has no device branch.
#pragma once

#include <cstdint>

#define SNUG_OP_LIST "kernels/kv_cache_ops.inc"
#include "kernels/declare_ops.inc"
#undef SNUG_OP_LIST

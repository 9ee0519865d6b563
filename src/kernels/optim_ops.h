// The optimizer updates as kernels (list and contracts: kernels/optim_ops.inc): snug::kernels
// (fast, OpenMP) and snug::ref (plain loops), reached through the op table (kernels/op_table.h)
// so that src/optim never asks which device holds the parameters.
#pragma once

#include <cstdint>

#include "kernels/quant8_code.h"

#define SNUG_OP_LIST "kernels/optim_ops.inc"
#include "kernels/declare_ops.inc"
#undef SNUG_OP_LIST

// Quantization and dequantization of frozen base weights as kernels (list and contracts:
// kernels/quant_ops.inc), reached through the op table so that quant/weight_quant.cpp needs no
// device branch. The formats, code tables and the blockwise quantizer are quant/quant.h's, which
// depends on core/ only (so kernels/ using it adds no cycle between the layers).
#pragma once

#include <cstdint>

#include "quant/quant.h"

#define SNUG_OP_LIST "kernels/quant_ops.inc"
#include "kernels/declare_ops.inc"
#undef SNUG_OP_LIST

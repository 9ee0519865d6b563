// Quantization and dequantization of frozen base weights as kernels (list and contracts:
// kernels/quant_ops.inc), reached through the op table so that quant/weight_quant.cpp needs no
// device branch. The formats, code tables and the blockwise quantizer are core/quant_format.h's,
// a layer below both kernels/ and quant/.
#pragma once

#include <cstdint>

#include "core/quant_format.h"

#define SNUG_OP_LIST "kernels/quant_ops.inc"
#include "kernels/declare_ops.inc"
#undef SNUG_OP_LIST

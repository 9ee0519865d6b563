// The one seam between snug and oneDNN (CMake option SNUG_ONEDNN). kernels/onednn/ implements
// these, gemm_f32 and gemm_bf16 (kernels/ops.inc), gemm_library (kernels/kernels.h) and
// onednn_cpu_isa (kernels/gemm_path.h) with oneDNN. Without it (a build for a machine that lacks
// libdnnl: the gpu-check preset) CMake compiles kernels/onednn/absent.cpp alone instead: fp32
// GEMMs on the CBLAS of the BLAS that LAPACK links, no bf16 matmul (gemm_bf16 throws, --gemm-path
// auto resolves to widen, onednn-bf16 is refused with the reason) and onednn_cpu_isa "absent".
// Kept apart from gemm_path.h, which nearly every file includes, so the seam can change cheaply.
#pragma once

#include "kernels/gemm_path.h"

namespace snug::kernels {

bool built_with_onednn();
// The fp32 GEMM's name in reports and --version: "dnnl_sgemm" or "cblas_sgemm".
const char* sgemm_name();
// What the GEMM library offers for bf16 x bf16 -> f32 here; bf16_matmul_support() caches it.
Bf16MatmulSupport probe_bf16_matmul();

}  // namespace snug::kernels

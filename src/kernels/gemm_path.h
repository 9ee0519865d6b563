// Which GEMM runs the 16-bit products of --bf16, --bf16-full and a bf16-compute quantized base.
//
//   widen        the 16-bit operands are widened to fp32 and multiplied by dnnl_sgemm: runs
//                everywhere, at fp32 speed (minus the conversion passes);
//   onednn_bf16  oneDNN's bf16 matmul primitive (bf16 operands, fp32 accumulation and output),
//                which runs on the bf16 units where the CPU has them: AMX (Intel Xeon since
//                Sapphire Rapids) or AVX512-BF16 (Intel Cooper Lake, AMD Zen 4/5).
//
// oneDNN 2.6.3 (Debian's) implements bf16 matmul only on AVX-512 CPUs; on AVX-512 without BF16
// it emulates it (slower than fp32) and on AVX2-only CPUs it has none. "auto" picks onednn_bf16
// only when the implementation oneDNN chooses is a native one (brgemm on avx512_core_bf16 or
// AMX), so the choice follows the hardware, never a vendor or model name. Forcing
// onednn-bf16 where oneDNN has no bf16 matmul at all is an error; where it only emulates it,
// it is allowed (for tests) and reported as such.
//
// The path changes which temporaries a step allocates (bf16 operand copies instead of fp32
// widened weights), so it is a run option the meta device replays like any other: `snug plan`
// with the same --gemm-path (default auto, i.e. this host's) equals `snug train` to the byte.
#pragma once

#include <string>
#include <string_view>

namespace snug::kernels {

enum class GemmPath { widen, onednn_bf16 };

// What oneDNN offers for a bf16 x bf16 -> f32 matmul on this CPU (probed once, cached).
struct Bf16MatmulSupport {
  bool available = false;  // oneDNN can create the primitive at all
  bool native = false;     // ... with a bf16-hardware implementation (not emulation)
  std::string impl;        // oneDNN's implementation name, e.g. "brg:avx512_core_amx_bf16"
  std::string reason;      // why not available / not native (empty when native)
};
const Bf16MatmulSupport& bf16_matmul_support();

// oneDNN's name for the highest ISA it uses here, e.g. "avx512_core_amx", "avx2".
std::string onednn_cpu_isa();

// "auto", "widen" or "onednn-bf16" (also "onednn_bf16"); throws snug::Error naming the flag
// --gemm-path and the known values otherwise.
void validate_gemm_path(std::string_view requested);
// The path a request resolves to, given what oneDNN offers (a pure function, tested with
// made-up supports): auto -> onednn_bf16 iff native; onednn-bf16 -> itself iff available,
// else snug::Error with the reason; widen -> widen.
GemmPath choose_gemm_path(std::string_view requested, const Bf16MatmulSupport& support);
// choose_gemm_path with this CPU's support.
GemmPath resolve_gemm_path(std::string_view requested);
// The path of a run on `device` (--device): on a GPU (cuda, cuda:N) the device's op table has
// its own bf16 GEMMs (cuBLASLt, bf16 operands, fp32 accumulation and output), so auto (and
// onednn-bf16, "the bf16 GEMM ops") take them and only widen widens; elsewhere as above. Without
// this a --bf16 run on an H200 widened every product to fp32 and ran at fp32 speed.
GemmPath resolve_gemm_path(std::string_view requested, std::string_view device);
const char* gemm_path_name(GemmPath p);  // "widen" / "onednn-bf16"
// What runs each dtype's GEMMs when bf16 takes path `bf16`, for reports and machine lines:
// {"fp32": "dnnl_sgemm", "bf16": "onednn-bf16 (brg:avx512_core_amx_bf16)" or "widen (...)",
//  "fp16": "widen (...)"}; and the same on one line with oneDNN's ISA.
std::string gemm_path_taken(GemmPath bf16);
std::string gemm_summary(GemmPath bf16);

}  // namespace snug::kernels

// Resolving --gemm-path (see gemm_path.h); the probing is the GEMM library's (kernels/onednn/).
#include "kernels/gemm_path.h"

#include "core/error.h"
#include "kernels/backends.h"
#include "kernels/gemm_library.h"

namespace snug::kernels {

const Bf16MatmulSupport& bf16_matmul_support() {
  static const Bf16MatmulSupport s = probe_bf16_matmul();
  return s;
}

void validate_gemm_path(std::string_view r) {
  SNUG_CHECK(r == "auto" || r == "widen" || r == "onednn-bf16" || r == "onednn_bf16",
             "--gemm-path: unknown path '", r, "' (known: auto, widen, onednn-bf16)");
}

GemmPath choose_gemm_path(std::string_view r, const Bf16MatmulSupport& s) {
  validate_gemm_path(r);
  if (r == "widen") return GemmPath::widen;
  if (r == "auto") return s.native ? GemmPath::onednn_bf16 : GemmPath::widen;
  SNUG_CHECK(s.available, "--gemm-path onednn-bf16: ", s.reason, "; use --gemm-path widen or auto");
  return GemmPath::onednn_bf16;
}

GemmPath resolve_gemm_path(std::string_view requested) {
  return choose_gemm_path(requested, bf16_matmul_support());
}

GemmPath resolve_gemm_path(std::string_view requested, std::string_view device) {
  if (!cuda_index(std::string(device))) return resolve_gemm_path(requested);
  validate_gemm_path(requested);
  return requested == "widen" ? GemmPath::widen : GemmPath::onednn_bf16;
}

const char* gemm_path_name(GemmPath p) {
  return p == GemmPath::onednn_bf16 ? "onednn-bf16" : "widen";
}

std::string gemm_path_taken(GemmPath bf16) {
  if (bf16 == GemmPath::widen)
    return std::string("widen (bf16 widened to fp32, ") + sgemm_name() + ")";
  const Bf16MatmulSupport& s = bf16_matmul_support();
  return "onednn-bf16 (oneDNN matmul " + s.impl + (s.native ? ")" : ", emulated)");
}

std::string gemm_summary(GemmPath bf16) {
  return std::string("GEMM fp32 ") + sgemm_name() + "; bf16 " + gemm_path_taken(bf16) +
         "; fp16 widen; oneDNN ISA " + onednn_cpu_isa();
}

}  // namespace snug::kernels

// Probing oneDNN's bf16 matmul and resolving --gemm-path (see gemm_path.h).
#include "kernels/gemm_path.h"

#include <oneapi/dnnl/dnnl.hpp>

#include "core/error.h"

namespace snug::kernels {

namespace {

Bf16MatmulSupport probe() {
  Bf16MatmulSupport s;
  try {
    using dt = dnnl::memory::data_type;
    using tag = dnnl::memory::format_tag;
    const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    // The shape of a small Linear; the implementation oneDNN picks does not depend on it here.
    const dnnl::memory::desc a({64, 64}, dt::bf16, tag::ab), b({64, 64}, dt::bf16, tag::ab),
        c({64, 64}, dt::f32, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), eng);
    s.available = true;
    s.impl = pd.impl_info_str();
    // brgemm kernels are the ones written for bf16 hardware (avx512_core_bf16, AMX); gemm:jit
    // and ref emulate bf16 with fp32 arithmetic (oneDNN's docs: 3-4x slower than fp32).
    s.native = s.impl.rfind("brg", 0) == 0;
    if (!s.native)
      s.reason = "oneDNN emulates bf16 matmul on this CPU (" + s.impl +
                 "): no AVX512-BF16 or AMX, so it would be slower than fp32";
  } catch (const dnnl::error& e) {
    s.reason = std::string("oneDNN has no bf16 matmul on this CPU (") + e.what() +
               "; oneDNN 2.6 needs AVX-512, natively AVX512-BF16 or AMX)";
  }
  return s;
}

}  // namespace

const Bf16MatmulSupport& bf16_matmul_support() {
  static const Bf16MatmulSupport s = probe();
  return s;
}

std::string onednn_cpu_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return "sse41";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic:
      return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "unknown";
  }
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

const char* gemm_path_name(GemmPath p) {
  return p == GemmPath::onednn_bf16 ? "onednn-bf16" : "widen";
}

std::string gemm_path_taken(GemmPath bf16) {
  if (bf16 == GemmPath::widen) return "widen (bf16 widened to fp32, dnnl_sgemm)";
  const Bf16MatmulSupport& s = bf16_matmul_support();
  return "onednn-bf16 (oneDNN matmul " + s.impl + (s.native ? ")" : ", emulated)");
}

std::string gemm_summary(GemmPath bf16) {
  return "GEMM fp32 dnnl_sgemm; bf16 " + gemm_path_taken(bf16) + "; fp16 widen; oneDNN ISA " +
         onednn_cpu_isa();
}

}  // namespace snug::kernels

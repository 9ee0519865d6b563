// What oneDNN offers on this CPU: its bf16 matmul (probed once, by kernels/gemm_path.cpp) and
// the ISA it runs. The oneDNN side of the seam in kernels/gemm_path.h.
#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/gemm_library.h"

namespace snug::kernels {

bool built_with_onednn() {
  return true;
}

Bf16MatmulSupport probe_bf16_matmul() {
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

}  // namespace snug::kernels

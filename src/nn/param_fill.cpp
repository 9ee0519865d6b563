#include "nn/param_fill.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "quant/weight_quant.h"

namespace snug::nn {

namespace {
constexpr int64_t kChunk = 4096;  // floats per host-buffer chunk (16 KiB)
}  // namespace

void fill_values(Parameter& p, const OpTable& ops,
                 const std::function<void(float*, int64_t)>& fill) {
  if (p.quantized()) {
    std::vector<float> host(static_cast<size_t>(p.numel()));
    fill(host.data(), p.numel());
    quantize_weight_into(*p.quant, host.data(), p.name);
    return;
  }
  const DType d = p.value.dtype();
  SNUG_CHECK(d == DType::f32 || d == DType::bf16 || d == DType::f16, "fill_values: '", p.name,
             "' is ", dtype_name(d), ", expected f32, bf16 or f16");
  const int64_t n = p.value.numel();
  std::vector<float> buf(static_cast<size_t>(std::min(kChunk, n)));
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t len = std::min(kChunk, n - c);
    fill(buf.data(), len);
    // (No offset from a null pointer: on meta the destination stays null.)
    if (d == DType::f32) {
      float* dst = p.value.data<float>();
      ops.copy_f32(dst ? dst + c : nullptr, buf.data(), len);
    } else {
      uint16_t* dst = p.value.data_u16();
      ops.pack_half(dst ? dst + c : nullptr, buf.data(), len, d == DType::f16);
    }
  }
}

}  // namespace snug::nn

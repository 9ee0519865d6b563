// The reference quantized-weight ops (kernels/quant_ops.inc): quantization through quant::quantize
// (the std::vector form, copied into the caller's buffers) and a dequantizer that decodes one
// element at a time.
#include <algorithm>
#include <array>

#include "core/error.h"
#include "kernels/quant_ops.h"

namespace snug::ref {

void quantize_weight_codes(uint8_t* codes, float* absmax, uint8_t* dq_codes, float* dq_absmax,
                           float* dq_offset, const float* w, int64_t n, quant::Format format,
                           int64_t block, bool double_quant) {
  SNUG_CHECK(w != nullptr, "no data");
  const quant::Quantized q =
      quant::quantize(w, {n}, format, quant::Options{.block = block, .double_quant = double_quant});
  std::copy(q.codes.begin(), q.codes.end(), codes);
  if (double_quant) {
    std::copy(q.dq_codes.begin(), q.dq_codes.end(), dq_codes);
    std::copy(q.dq_absmax.begin(), q.dq_absmax.end(), dq_absmax);
    *dq_offset = q.dq_offset;
  } else {
    std::copy(q.scales.begin(), q.scales.end(), absmax);
  }
}

void dequantize_weight_codes(float* out, const uint8_t* codes, const float* absmax,
                             const uint8_t* dq_codes, const float* dq_absmax,
                             const float* dq_offset, int64_t n, quant::Format format, int64_t block,
                             bool double_quant) {
  const bool int8 = format == quant::Format::int8_blockwise;
  const std::array<float, 16>& code =
      format == quant::Format::nf4 ? quant::nf4_code() : quant::fp4_code();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = i / block;
    if (int8) {
      out[i] = static_cast<float>(static_cast<int8_t>(codes[i])) * (absmax[b] / 127.0f);
      continue;
    }
    const float a = double_quant
                        ? quant::double_dequant_absmax(
                              dq_codes[b], dq_absmax[b / quant::kDoubleQuantBlock], *dq_offset)
                        : absmax[b];
    const uint8_t byte = codes[i / 2];
    out[i] = code[i % 2 == 0 ? byte >> 4 : byte & 0x0Fu] * a;
  }
}

}  // namespace snug::ref

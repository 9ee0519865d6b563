// The fast quantized-weight ops (kernels/quant_ops.inc): core/quant_format.h's blockwise
// quantizer writing into the caller's buffers, and a dequantizer parallel over blocks.
#include "kernels/quant_ops.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace snug::kernels {

namespace {

constexpr int64_t kParallelMin = int64_t{1} << 16;  // below this, one thread is faster

bool is_4bit(quant::Format f) {
  return f == quant::Format::nf4 || f == quant::Format::fp4;
}

}  // namespace

void quantize_weight_codes(uint8_t* codes, float* absmax, uint8_t* dq_codes, float* dq_absmax,
                           float* dq_offset, const float* w, int64_t n, quant::Format format,
                           int64_t block, bool double_quant) {
  SNUG_CHECK(w != nullptr, "no data");
  quant::Options o;
  o.block = block;
  if (is_4bit(format))  // nibbles are merged into shared bytes
    std::memset(codes, 0, static_cast<size_t>(quant::storage_breakdown(format, n, o).codes));
  const int64_t nb = (n + block - 1) / block;
  std::vector<float> staged;  // double quantization's fp32 absmax, when the caller gave none
  if (absmax == nullptr) {
    staged.resize(static_cast<size_t>(nb));
    absmax = staged.data();
  }
  quant::quantize_blockwise_into(w, n, format, block, codes, absmax);
  if (double_quant) *dq_offset = quant::double_quantize_into(absmax, nb, dq_codes, dq_absmax);
}

void dequantize_weight_codes(float* out, const uint8_t* codes, const float* absmax,
                             const uint8_t* dq_codes, const float* dq_absmax,
                             const float* dq_offset, int64_t n, quant::Format format, int64_t block,
                             bool double_quant) {
  SNUG_ASSERT(out != nullptr);
  const int64_t nb = (n + block - 1) / block;
  if (format == quant::Format::int8_blockwise) {
    const int8_t* c8 = reinterpret_cast<const int8_t*>(codes);
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (int64_t b = 0; b < nb; ++b) {
      const float s = absmax[b] / 127.0f;  // as quant::dequantize: divide, then multiply
      const int64_t begin = b * block, end = std::min(n, begin + block);
      for (int64_t i = begin; i < end; ++i) out[i] = static_cast<float>(c8[i]) * s;
    }
    return;
  }
  const std::array<float, 16>& code =
      format == quant::Format::nf4 ? quant::nf4_code() : quant::fp4_code();
  const float offset = double_quant ? *dq_offset : 0.0f;
  // Blocks write disjoint ranges of out and only read the packed codes, so any block length
  // (odd ones share a byte with the neighbour) runs in parallel.
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t b = 0; b < nb; ++b) {
    const float a = double_quant ? quant::double_dequant_absmax(
                                       dq_codes[b], dq_absmax[b / quant::kDoubleQuantBlock], offset)
                                 : absmax[b];
    const int64_t begin = b * block, end = std::min(n, begin + block);
    int64_t i = begin;
    if (i & 1) {  // block starts in a low nibble
      out[i] = code[codes[i >> 1] & 0x0Fu] * a;
      ++i;
    }
    for (; i + 1 < end; i += 2) {  // whole bytes: high nibble first
      const uint8_t byte = codes[i >> 1];
      out[i] = code[byte >> 4] * a;
      out[i + 1] = code[byte & 0x0Fu] * a;
    }
    if (i < end) out[i] = code[codes[i >> 1] >> 4] * a;
  }
}

}  // namespace snug::kernels

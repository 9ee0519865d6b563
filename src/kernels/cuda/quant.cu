// The dequantizer of kernels/quant_ops.inc on the GPU: a QLoRA / 8-bit base weight's codes
// (nf4, fp4, int8_blockwise; the 4-bit formats with or without double quantization) back to
// fp32, bit-identical to quant::dequantize. quantize_weight_codes is host-only (the loader
// quantizes staged host values), so the op table keeps its host entry.
//
// Why the bits match: each value is one product (code * absmax; int8: code * (absmax / 127),
// divided first, as the reference does), and the double-quantized absmax is
// quant::double_dequant_absmax's product and sum, rounded separately (this file is compiled
// without fused multiply-adds, src/CMakeLists.txt).
#include <algorithm>
#include <array>

#include "core/error.h"
#include "core/quant_format.h"
#include "kernels/cuda/context.cuh"
#include "kernels/quant_ops.h"

namespace snug::cuda {

namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t n) {
  return std::min(blocks_for(n, kThreads), 4096u);
}

__device__ int64_t first_index() {
  return blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
}
__device__ int64_t grid_stride() {
  return int64_t{gridDim.x} * blockDim.x;
}

__global__ void dequant_int8_kernel(float* out, const uint8_t* codes, const float* absmax,
                                    int64_t n, int64_t block) {
  for (int64_t i = first_index(); i < n; i += grid_stride())
    out[i] = static_cast<float>(static_cast<int8_t>(codes[i])) * (absmax[i / block] / 127.0f);
}

// The 4-bit code book and, with double quantization, the signed dynamic map its absmax codes
// index (quant::dynamic_map(true)), by value.
struct Books {
  float code[16];
  float dynamic[256];
};

// One thread per code byte: elements 2k (high nibble) and 2k + 1 (low nibble), each scaled by
// its own block's absmax (an odd block length puts two blocks in one byte).
__global__ void dequant_4bit_kernel(float* out, const uint8_t* codes, const float* absmax,
                                    const uint8_t* dq_codes, const float* dq_absmax,
                                    const float* dq_offset, int64_t n, int64_t block,
                                    bool double_quant, Books books) {
  __shared__ float code[16], dynamic[256];
  if (threadIdx.x < 16) code[threadIdx.x] = books.code[threadIdx.x];
  dynamic[threadIdx.x] = books.dynamic[threadIdx.x];
  __syncthreads();
  const float offset = double_quant ? *dq_offset : 0.0f;
  const int64_t bytes = (n + 1) / 2;
  for (int64_t k = first_index(); k < bytes; k += grid_stride()) {
    const uint8_t byte = codes[k];
    for (int64_t i = 2 * k; i < std::min(n, 2 * k + 2); ++i) {
      const int64_t b = i / block;
      float a;
      if (double_quant) {
        // quant::double_dequant_absmax: map[dq_code] * group absmax, then + offset.
        const float v = dynamic[dq_codes[b]] * dq_absmax[b / quant::kDoubleQuantBlock];
        a = v + offset;
      } else {
        a = absmax[b];
      }
      out[i] = code[i % 2 == 0 ? byte >> 4 : byte & 0x0Fu] * a;
    }
  }
}

void dequantize_weight_codes(float* out, const uint8_t* codes, const float* absmax,
                             const uint8_t* dq_codes, const float* dq_absmax,
                             const float* dq_offset, int64_t n, quant::Format format, int64_t block,
                             bool double_quant) {
  SNUG_CHECK(block > 0, "dequantize_weight_codes: block size must be positive, got ", block);
  if (n <= 0) return;
  if (format == quant::Format::int8_blockwise) {
    dequant_int8_kernel<<<grid_for(n), kThreads, 0, stream()>>>(out, codes, absmax, n, block);
    check_launch("dequantize_weight_codes");
    return;
  }
  Books books{};
  const std::array<float, 16>& code =
      format == quant::Format::nf4 ? quant::nf4_code() : quant::fp4_code();
  std::copy(code.begin(), code.end(), books.code);
  if (double_quant) {
    const std::array<float, 256>& map = quant::dynamic_map(true);
    std::copy(map.begin(), map.end(), books.dynamic);
  }
  dequant_4bit_kernel<<<grid_for((n + 1) / 2), kThreads, 0, stream()>>>(
      out, codes, absmax, dq_codes, dq_absmax, dq_offset, n, block, double_quant, books);
  check_launch("dequantize_weight_codes");
}

}  // namespace

void register_quant(OpTable& t) {
  t.dequantize_weight_codes = &dequantize_weight_codes;
}

}  // namespace snug::cuda

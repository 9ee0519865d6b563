// The bf16 packing around cuDNN's attention (kernels/cuda/cudnn_attention.h).
#include "kernels/cuda/context.cuh"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/half_bits.cuh"

namespace snug::cuda {

namespace {

__global__ void pack_rows_kernel(uint16_t* dst, const float* src, int64_t rows, int64_t width,
                                 int64_t ld) {
  const int64_t n = rows * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    dst[i] = f32_to_bf16(src[(i / width) * ld + i % width]);
}

__global__ void unpack_rows_kernel(float* dst, int64_t ld, const uint16_t* src, int64_t rows,
                                   int64_t width) {
  const int64_t n = rows * width;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    dst[(i / width) * ld + i % width] = bf16_to_f32(src[i]);
}

}  // namespace

void pack_rows_bf16(uint16_t* dst, const float* src, int64_t rows, int64_t width, int64_t ld_src) {
  if (rows <= 0 || width <= 0) return;
  pack_rows_kernel<<<capped_blocks(rows * width, 8192), 256, 0, stream()>>>(dst, src, rows, width,
                                                                            ld_src);
  check_launch("pack_rows_bf16");
}

void unpack_rows_bf16(float* dst, int64_t ld_dst, const uint16_t* src, int64_t rows,
                      int64_t width) {
  if (rows <= 0 || width <= 0) return;
  unpack_rows_kernel<<<capped_blocks(rows * width, 8192), 256, 0, stream()>>>(dst, ld_dst, src,
                                                                              rows, width);
  check_launch("unpack_rows_bf16");
}

}  // namespace snug::cuda

// cuDNN's fused attention for --bf16 runs on a GPU: the SDPA graphs of NVIDIA's header-only
// cudnn-frontend over libcudnn 9 (loaded at run time, so a binary built with it starts where
// cuDNN is missing). Behind the build option SNUG_CUDNN (kernels/cuda/cudnn/); without it these
// return false and snug's own kernels run (flash.cu, flash_tiled.cu).
//
// Why: snug's flash attention multiplies in fp32 on the CUDA cores (11-16 TFLOP/s on an H200);
// PyTorch under autocast runs bf16 attention on the tensor cores, and at gpt2-124m (B=16,
// T=1024) snug's fp32 attention alone took as long as PyTorch's whole bf16 step. cuDNN's SDPA is
// the vendor's flash attention (hundreds of TFLOP/s on Hopper).
//
// Taken only when AttentionDims::bf16_operands says the run computes in bf16, so fp32 runs stay
// fp32 bit for bit. The fp32 operands (bf16 values) are packed to bf16 (B,T,heads,hs) copies,
// cuDNN computes with fp32 accumulation and softmax and bf16 probabilities, writes the lse
// (B,NH,T) in fp32 as snug's kernels do (natural log), and its bf16 outputs are widened into the
// caller's fp32 tensors. The backward is cuDNN's deterministic algorithm: two runs give the same
// bits. Not taken (false, nothing written): position ids (packed documents), a sliding window,
// dropout, a head size not a multiple of 8 or above 128, cuDNN missing or refusing the graph
// (said once on stderr), or SNUG_CUDA_CUDNN=0 in the environment.
//
// Device memory: each call takes its bf16 copies and cuDNN's workspace as stream-ordered scratch
// (cuda::Scratch, outside snug's tracked pool), freed when it returns; the most one call held is
// reported as memory.driver.attention_scratch_bytes. Graphs are built once per shape and cached.
#pragma once

#include <cstdint>

#include "kernels/attention_dims.h"

namespace snug::cuda {

// Built with SNUG_CUDNN, and not switched off by SNUG_CUDA_CUDNN=0.
bool cudnn_attention_enabled();

// As flash_attention_forward_gqa / flash_attention_backward_gqa (kernels/flash_ops.inc), on
// device pointers; false when cuDNN does not take the call (see above).
bool cudnn_attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                             const AttentionDims& d);
bool cudnn_attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                              const float* k, const float* v, const float* out, const float* lse,
                              const AttentionDims& d);

// The most device bytes one call held as scratch (bf16 copies and cuDNN's workspace); 0 before.
int64_t cudnn_attention_scratch_high();

// The conversions around it (bf16_rows.cu): dst(rows, width) bf16, dense = src rows of `width`
// fp32 values at row stride ld_src, rounded to nearest even; and back, dst rows at stride
// ld_dst = src(rows, width) widened. On the backend's stream.
void pack_rows_bf16(uint16_t* dst, const float* src, int64_t rows, int64_t width, int64_t ld_src);
void unpack_rows_bf16(float* dst, int64_t ld_dst, const uint16_t* src, int64_t rows, int64_t width);

}  // namespace snug::cuda

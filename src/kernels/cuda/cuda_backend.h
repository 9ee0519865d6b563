// The CUDA backend (issue 27): a GPU's memory, its copies and its kernel table behind
// core/backend.h, reached by `--device cuda` or `cuda:N` through backend_named
// (kernels/backends.h). Nothing here includes a CUDA header, so the rest of snug builds and runs
// the same with or without the toolkit: a build without SNUG_CUDA links absent.cpp, whose
// functions say so.
//
// One GPU per process (data parallelism runs one process per GPU). Every op and copy is queued on
// one stream of that GPU; a download waits for it, so host code that reads a value sees every
// op queued before.
//
// Memory: by default each device's pool places its tensors in a paged arena of its own
// (core/page_arena.h over kernels/cuda/pages.cu), so what the driver holds for tensors stays
// within 2% of the tracked peak and a plan states it. SNUG_CUDA_ALLOC=async takes the
// stream-ordered allocator (cudaMallocAsync) instead, and SNUG_CUDA_ALLOC=debug gives each tensor
// its own cudaMalloc, freed at once, so compute-sanitizer's memcheck sees each tensor's bounds.
// The pool counts the bytes a tensor asks for, as on every device; the driver's own figures
// (context, cuBLASLt's workspace) are reported beside it (cuda_memory_info).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/backend.h"

namespace snug {

// cuBLASLt's workspace, allocated once per GPU outside the pool (its documentation asks at least
// 32 MiB on Hopper). A constant, so that `plan --device cuda` names it without a GPU.
constexpr int64_t kCudaLibraryWorkspaceBytes = int64_t{32} << 20;

// True when this snug was built with the CUDA backend.
bool cuda_built();
// GPUs the driver shows (0 without the backend, without a driver or without a GPU).
int cuda_device_count();
// Why no GPU can be used ("" when one can): built without CUDA, no driver, no device.
std::string cuda_unavailable_reason();
// The backend of GPU `index` (its context made on first use). Throws snug::Error naming the
// reason when there is none, or when another GPU is already in use by this process.
const Backend& cuda_backend(int index);

// What `snug info` and the report say about a GPU.
struct CudaDeviceInfo {
  std::string name;       // "NVIDIA H100 80GB HBM3"
  int compute_major = 0;  // 9
  int compute_minor = 0;  // 0
  int multiprocessors = 0;
  int64_t total_bytes = 0;  // device memory
  int driver_version = 0;   // 13000
  int runtime_version = 0;
};
CudaDeviceInfo cuda_device_info(int index);

// The driver's view of the GPU in use (all zero before cuda_backend made its context):
//   device_used        total - free now, every process's use included;
//   context            device_used when the context was made, before snug allocated anything
//                      (the CUDA context and what other processes held);
//   library_workspace  what snug's libraries hold outside the pool (cuBLASLt's workspace);
//   pool_used_high     the stream-ordered pool's high-water mark of bytes handed to tensors (the
//                      driver's count of the tracked peak, with its rounding; 0 with the debug
//                      backing);
//   pool_reserved_high the pool's high-water mark of memory taken from the device;
//   attention_scratch  the most bytes one cuDNN attention call held as stream-ordered scratch
//                      (its bf16 copies and cuDNN's workspace; kernels/cuda/cudnn_attention.h),
//                      taken from the same pool but outside snug's tracked categories.
struct CudaMemoryInfo {
  int64_t device_used = 0;
  int64_t device_total = 0;
  int64_t context = 0;
  int64_t library_workspace = 0;
  int64_t pool_used_high = 0;
  int64_t pool_reserved_high = 0;
  int64_t attention_scratch = 0;
};
CudaMemoryInfo cuda_memory_info();

// Ops of the table that have no CUDA kernel yet (calling one throws, naming it).
std::vector<std::string> cuda_missing_ops();

}  // namespace snug

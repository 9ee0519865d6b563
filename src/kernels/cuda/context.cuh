// What every CUDA kernel file shares: the stream ops are queued on, the cuBLASLt handle and its
// workspace, error checks that name the call, and the launch geometry helpers. Included by .cu
// files only (it includes the CUDA headers).
//
// Kernels follow the op lists' contracts (kernels/ops.inc and the other lists) exactly, with
// device pointers; each is checked against snug::ref by tests/cuda/*_cudatest.cpp.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/op_table.h"

namespace snug::cuda {

// The stream of the GPU in use (made by cuda_backend()).
cudaStream_t stream();
cublasLtHandle_t lt_handle();
// cuBLASLt's workspace on the device, allocated once outside the pool.
void* lt_workspace();
size_t lt_workspace_bytes();

// Throws snug::Error "CUDA error in <what>: <cuda message>" (an out-of-memory included).
void check(cudaError_t e, const char* what);
void check_cublas(cublasStatus_t s, const char* what);
// After a launch: the launch's own error, if any, named.
void check_launch(const char* what);
// Waits for the stream (values read on the host).
void sync(const char* what);

// Thread blocks for n elements at `threads` per block (at least 1).
inline unsigned blocks_for(int64_t n, int threads = 256) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > 2147483647 ? 2147483647 : b));
}

// blocks_for capped at `cap` blocks, for grid-stride loops.
inline unsigned capped_blocks(int64_t n, unsigned cap, int threads = 256) {
  const unsigned b = blocks_for(n, threads);
  return b > cap ? cap : b;
}

// A device scratch buffer of the stream-ordered allocator, for the few kernels that need one:
// reductions' partial sums (a few KiB), the cross-entropy's per-row losses (8 bytes a row), flash
// attention's row sums (4 bytes a row), rope's angle table, and cuDNN attention's bf16 copies and
// workspace (megabytes). Freed on the stream at scope exit. It is not a tensor, so the pool does
// not count it: what it holds at most is the driver's pool_used_high_bytes (docs/report.md,
// memory.driver), and cuDNN's part of it attention_scratch_bytes. A new use that is larger
// than a value per row gets a name of its own there.
class Scratch {
 public:
  explicit Scratch(size_t bytes);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
};

// Each kernel file's entries of the CUDA op table (op_table.cu calls every one). An op no file
// registers keeps a stub that throws, naming it (cuda_missing_ops lists them).
#define SNUG_CUDA_KERNEL_FILES(X) \
  X(elementwise)                  \
  X(gemm)                         \
  X(blocks)                       \
  X(xent)                         \
  X(flash)                        \
  X(attention)                    \
  X(rope)                         \
  X(llama)                        \
  X(precision)                    \
  X(lora)                         \
  X(kv_cache)                     \
  X(optim)                        \
  X(quant)
#define SNUG_CUDA_DECLARE_REGISTER(file) void register_##file(OpTable& t);
SNUG_CUDA_KERNEL_FILES(SNUG_CUDA_DECLARE_REGISTER)
#undef SNUG_CUDA_DECLARE_REGISTER

}  // namespace snug::cuda

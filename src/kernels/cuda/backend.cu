// The CUDA backend (kernels/cuda/cuda_backend.h): one GPU's context, stream, allocator, copies
// and cuBLASLt handle.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "core/error.h"
#include "kernels/backends.h"
#include "kernels/cuda/context.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cudnn_attention.h"
#include "kernels/cuda/pages.h"

namespace snug {

const OpTable& cuda_op_table();  // op_table.cu

namespace cuda {

namespace {

constexpr size_t kLtWorkspaceBytes = static_cast<size_t>(kCudaLibraryWorkspaceBytes);

struct Context {
  int index = -1;
  cudaStream_t stream = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  bool debug_alloc = false;
  bool paged = false;  // the paged arena (SNUG_CUDA_ALLOC=pages, the default)
  int64_t total_bytes = 0;
  int64_t context_bytes = 0;
  cudaMemPool_t pool = nullptr;
};

Context& ctx() {
  static Context c;
  return c;
}

std::string cuda_message(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

class CudaBackend final : public Backend {
 public:
  const char* name() const override { return "cuda"; }
  bool backed() const override { return true; }
  bool host_addressable() const override { return false; }

  void* allocate(int64_t bytes) const override {
    if (bytes <= 0) return nullptr;
    void* p = nullptr;
    const cudaError_t e = ctx().debug_alloc
                              ? cudaMalloc(&p, static_cast<size_t>(bytes))
                              : cudaMallocAsync(&p, static_cast<size_t>(bytes), ctx().stream);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear it: the pool reports the budget (core/memory.cpp)
      return nullptr;
    }
    check(e, "cudaMalloc");
    return p;
  }
  // Never throws: tensors are released in destructors, also while an error unwinds. A failure
  // here is an earlier kernel's (CUDA errors are sticky): said once on stderr; the error that
  // stops the run comes from the next checked call.
  void release(void* p, int64_t) const override {
    if (!p) return;
    const cudaError_t e = ctx().debug_alloc ? cudaFree(p) : cudaFreeAsync(p, ctx().stream);
    if (e != cudaSuccess) {
      static bool said = false;
      if (!said)
        std::fprintf(stderr, "snug: CUDA error while freeing device memory: %s\n",
                     cuda_message(e).c_str());
      said = true;
    }
  }
  void zero(void* dst, int64_t bytes) const override {
    if (bytes > 0)
      check(cudaMemsetAsync(dst, 0, static_cast<size_t>(bytes), ctx().stream), "cudaMemsetAsync");
  }
  // From pageable host memory the copy has taken the source's bytes when it returns.
  void upload(void* dst, const void* src, int64_t bytes) const override {
    if (bytes > 0)
      check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice,
                            ctx().stream),
            "upload (cudaMemcpyAsync host to device)");
  }
  void download(void* dst, const void* src, int64_t bytes) const override {
    if (bytes <= 0) return;
    check(
        cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, ctx().stream),
        "download (cudaMemcpyAsync device to host)");
    sync("download");
  }
  void copy(void* dst, const void* src, int64_t bytes) const override {
    if (bytes > 0 && dst != src)
      check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice,
                            ctx().stream),
            "copy (cudaMemcpyAsync device to device)");
  }
  const OpTable& ops() const override { return cuda_op_table(); }
  std::unique_ptr<PageBacking> page_backing() const override {
    return ctx().paged ? make_page_backing(ctx().index, ctx().total_bytes) : nullptr;
  }
};

void init_context(int index) {
  Context& c = ctx();
  check(cudaSetDevice(index), "cudaSetDevice");
  check(cudaFree(nullptr), "making the CUDA context");
  size_t free_b = 0, total_b = 0;
  check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  c.context_bytes = static_cast<int64_t>(total_b - free_b);
  check(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  // Keep freed blocks in the pool for reuse (the default threshold 0 returns them to the driver at
  // every synchronisation, which costs a driver call per tensor per step).
  cudaMemPool_t pool = nullptr;
  check(cudaDeviceGetDefaultMemPool(&pool, index), "cudaDeviceGetDefaultMemPool");
  c.pool = pool;
  uint64_t threshold = UINT64_MAX;
  check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold),
        "cudaMemPoolSetAttribute");
  check_cublas(cublasLtCreate(&c.lt), "cublasLtCreate");
  check(cudaMalloc(&c.workspace, kLtWorkspaceBytes), "cudaMalloc (cuBLASLt workspace)");
  const std::string mode = cuda_alloc_mode();
  c.debug_alloc = mode == "debug";
  c.paged = mode == "pages";
  c.total_bytes = static_cast<int64_t>(total_b);
  c.index = index;
}

}  // namespace

cudaStream_t stream() {
  return ctx().stream;
}
cublasLtHandle_t lt_handle() {
  return ctx().lt;
}
void* lt_workspace() {
  return ctx().workspace;
}
size_t lt_workspace_bytes() {
  return kLtWorkspaceBytes;
}

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();
  throw Error(std::string("CUDA error in ") + what + ": " + cuda_message(e));
}

void check_cublas(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw Error(std::string("cuBLASLt error in ") + what + ": status " +
              std::to_string(static_cast<int>(s)));
}

void check_launch(const char* what) {
  check(cudaGetLastError(), what);
  // SNUG_CUDA_SYNC=1: wait after every launch, so an error names the op that caused it.
  static const bool sync_each = [] {
    const char* v = std::getenv("SNUG_CUDA_SYNC");
    return v && std::strcmp(v, "1") == 0;
  }();
  if (sync_each) check(cudaStreamSynchronize(ctx().stream), what);
}

void sync(const char* what) {
  check(cudaStreamSynchronize(ctx().stream), what);
}

Scratch::Scratch(size_t bytes) {
  check(cudaMallocAsync(&p_, bytes, ctx().stream), "cudaMallocAsync (scratch)");
}
Scratch::~Scratch() {
  if (p_) (void)cudaFreeAsync(p_, ctx().stream);
}

}  // namespace cuda

bool cuda_built() {
  return true;
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

std::string cuda_unavailable_reason() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return "no usable CUDA driver or GPU (" + cuda::cuda_message(e) + ")";
  }
  if (n == 0) return "the CUDA driver shows no GPU";
  return "";
}

const Backend& cuda_backend(int index) {
  static std::mutex mu;
  static cuda::CudaBackend backend;
  std::lock_guard<std::mutex> lock(mu);
  const std::string why = cuda_unavailable_reason();
  SNUG_CHECK(why.empty(), "--device cuda: ", why);
  const int n = cuda_device_count();
  SNUG_CHECK(index >= 0 && index < n, "--device cuda:", index, ": this machine has ", n,
             " GPU(s) (cuda:0 to cuda:", n - 1, ")");
  cuda::Context& c = cuda::ctx();
  if (c.index < 0) cuda::init_context(index);
  SNUG_CHECK(c.index == index, "--device cuda:", index,
             ": this process already uses cuda:", c.index, " (one GPU per process)");
  return backend;
}

CudaDeviceInfo cuda_device_info(int index) {
  cudaDeviceProp p{};
  cuda::check(cudaGetDeviceProperties(&p, index), "cudaGetDeviceProperties");
  CudaDeviceInfo info;
  info.name = p.name;
  info.compute_major = p.major;
  info.compute_minor = p.minor;
  info.multiprocessors = p.multiProcessorCount;
  info.total_bytes = static_cast<int64_t>(p.totalGlobalMem);
  cuda::check(cudaDriverGetVersion(&info.driver_version), "cudaDriverGetVersion");
  cuda::check(cudaRuntimeGetVersion(&info.runtime_version), "cudaRuntimeGetVersion");
  return info;
}

CudaMemoryInfo cuda_memory_info() {
  CudaMemoryInfo m;
  if (cuda::ctx().index < 0) return m;
  size_t free_b = 0, total_b = 0;
  cuda::check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  m.device_total = static_cast<int64_t>(total_b);
  m.device_used = static_cast<int64_t>(total_b - free_b);
  m.library_workspace = static_cast<int64_t>(cuda::kLtWorkspaceBytes);
  m.context = cuda::ctx().context_bytes;
  uint64_t used = 0, reserved = 0;
  cuda::check(cudaMemPoolGetAttribute(cuda::ctx().pool, cudaMemPoolAttrUsedMemHigh, &used),
              "cudaMemPoolGetAttribute");
  cuda::check(cudaMemPoolGetAttribute(cuda::ctx().pool, cudaMemPoolAttrReservedMemHigh, &reserved),
              "cudaMemPoolGetAttribute");
  m.pool_used_high = static_cast<int64_t>(used);
  m.pool_reserved_high = static_cast<int64_t>(reserved);
  m.attention_scratch = cuda::cudnn_attention_scratch_high();
  return m;
}

}  // namespace snug

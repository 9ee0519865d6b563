// The CUDA backend's functions in a build without it (SNUG_CUDA off): --device cuda is refused
// with the reason, and `snug info` says the backend is not built.
#include "core/error.h"
#include "kernels/cuda/cuda_backend.h"

namespace snug {

namespace {
constexpr const char* kReason =
    "this snug was built without the CUDA backend (configure with the CUDA toolkit installed, or "
    "-DSNUG_CUDA=ON)";
}

bool cuda_built() {
  return false;
}
int cuda_device_count() {
  return 0;
}
std::string cuda_unavailable_reason() {
  return kReason;
}
const Backend& cuda_backend(int) {
  throw Error(std::string("--device cuda: ") + kReason);
}
CudaDeviceInfo cuda_device_info(int) {
  throw Error(std::string("cuda: ") + kReason);
}
CudaMemoryInfo cuda_memory_info() {
  return {};
}
std::vector<std::string> cuda_missing_ops() {
  return {};
}

}  // namespace snug

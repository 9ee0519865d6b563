#include "report/device_memory.h"

#include "core/memory.h"
#include "kernels/backends.h"
#include "kernels/cuda/cuda_backend.h"
#include "report/report.h"

namespace snug {

namespace {

bool is_gpu(const Device& dev) {
  return cuda_index(dev.name()).has_value();
}

}  // namespace

void add_device_memory(nlohmann::json& memory, Device& dev) {
  if (&dev.host() != &dev) memory["host"] = memory_json(dev.host().pool().stats(), std::nullopt);
  if (!is_gpu(dev)) return;
  const CudaMemoryInfo m = cuda_memory_info();
  memory["driver"] = {{"device_used_bytes", m.device_used},
                      {"device_total_bytes", m.device_total},
                      {"context_bytes", m.context},
                      {"library_workspace_bytes", m.library_workspace},
                      {"pool_used_high_bytes", m.pool_used_high},
                      {"pool_reserved_high_bytes", m.pool_reserved_high},
                      {"attention_scratch_bytes", m.attention_scratch}};
}

std::string device_memory_lines(Device& dev) {
  std::string s;
  // The host pool in full where it holds more than staging (--offload-optimizer cpu: state;
  // --offload-param cpu: the stage-3 shards, weights).
  if (&dev.host() != &dev) {
    const MemoryStats h = dev.host().pool().stats();
    if (h.max_by_category[static_cast<int>(Category::optimizer_state)] > 0 ||
        h.max_by_category[static_cast<int>(Category::weights)] > 0)
      s += "\nhost pool (offloaded optimizer state and update, parameter shards, staging):\n" +
           memory_table(h, std::nullopt);
    else
      s += "host pool (staging) peak " + format_bytes(h.peak_total) + "\n";
  }
  if (!is_gpu(dev)) return s;
  const CudaMemoryInfo m = cuda_memory_info();
  s += "GPU, as the driver counts it: " + format_bytes(m.device_used) + " in use of " +
       format_bytes(m.device_total) + " (context " + format_bytes(m.context) +
       ", cuBLASLt workspace " + format_bytes(m.library_workspace) + ", pool high-water " +
       format_bytes(m.pool_used_high) + " used, " + format_bytes(m.pool_reserved_high) +
       " reserved" +
       (m.attention_scratch > 0
            ? ", cuDNN attention scratch " + format_bytes(m.attention_scratch) + " at most"
            : std::string()) +
       ")\n";
  return s;
}

}  // namespace snug

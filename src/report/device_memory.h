// What a run reports about memory beyond its device pool's categories, where the device is an
// accelerator (kernels/cuda/cuda_backend.h): the host pool beside it (staging, core/device.h) and
// what the driver counts (the context, library workspaces, the stream-ordered pool's own
// high-water marks). Empty on cpu and meta, whose one pool is the whole story.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/device.h"

namespace snug {

// Adds "host" (the host pool, as memory_json) and "driver" (CudaMemoryInfo, in bytes) to a
// report's "memory" object when `dev` is a GPU; leaves it unchanged otherwise.
void add_device_memory(nlohmann::json& memory, Device& dev);
// The same as lines under the memory table ("" on cpu and meta).
std::string device_memory_lines(Device& dev);

}  // namespace snug

// What a run reports about memory beyond its device pool's categories, where the device is an
// accelerator (kernels/cuda/cuda_backend.h): the host pool beside it (staging, core/device.h) and
// what the driver counts (the context, library workspaces, the stream-ordered pool's own
// high-water marks). On cpu and meta the one pool is the whole story, unless the run gave the
// device a host pool apart (--offload-optimizer/--offload-param cpu, train/offload.h): then "host"
// too.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/device.h"

namespace snug {

// Adds "host" (the host pool, as memory_json) when `dev` has one apart, and "driver"
// (CudaMemoryInfo, in bytes) when `dev` is a GPU.
void add_device_memory(nlohmann::json& memory, Device& dev);
// The same as lines under the memory table: the host pool's table where it holds offloaded
// optimizer state or parameter shards, else its peak ("" without a host pool or a GPU).
std::string device_memory_lines(Device& dev);

}  // namespace snug

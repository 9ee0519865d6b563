// The backends of snug's devices (core/backend.h), each an allocator, its copies and its op
// table (kernels/op_table.h):
//   cpu   the host heap (core's host_allocate, 64-byte aligned), memcpy and memset, the fast
//         kernels; the host addresses its memory;
//   meta  allocates nothing (the pool still counts every tensor), copies and zeroing do nothing,
//         the meta table's no-ops: a dry run.
// A device is made by handing one to it: `Device dev(cpu_backend())`. An accelerator (CUDA,
// issue 27 step 2) is one more Backend, named by backend_named, whose memory the host does not
// address: host data reaches it through Device::upload/download and core/host_staging.h, and its
// host-only ops (kernels/op_table.h) run on staged copies.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/backend.h"
#include "core/device.h"

namespace snug {

const Backend& cpu_backend();
const Backend& meta_backend();
// The cpu kernels behind addresses the host cannot dereference (kernels/backends.cpp): a stand-in
// for an accelerator, for tests and `--device cpu-remote`.
const Backend& cpu_remote_backend();
// The backend a --device value names: "cpu", "meta", "cpu-remote", "cuda" (= cuda:0) or "cuda:N"
// (kernels/cuda/cuda_backend.h; refused with the reason where there is no GPU or no CUDA build);
// anything else is refused by name.
const Backend& backend_named(const std::string& name);
// The GPU index of "cuda"/"cuda:N", nullopt for other names.
std::optional<int> cuda_index(const std::string& name);
// The Device a --device value names, with a host device of its own for staging where the host
// does not address its memory (cuda, cpu-remote): the run's host pool, reported beside it.
std::unique_ptr<Device> make_device(const std::string& name);
// True when `name` is a device name backend_named knows (whether or not it can be used here).
bool is_device_name(const std::string& name);
// How a cuda device allocates, from SNUG_CUDA_ALLOC: "pages" (unset: the paged arena,
// core/page_arena.h), "async" (the stream-ordered pool) or "debug" (one cudaMalloc per tensor,
// for compute-sanitizer). Anything else is refused by name.
std::string cuda_alloc_mode();
// A plan's meta device keeps the page books the planned device's pool keeps (a cuda device with
// the paged arena), so the plan states the pages the run will hold (memory.pages).
void keep_pages_of(Device& meta, const std::string& planned_device);

}  // namespace snug

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

#include <string>

#include "core/backend.h"

namespace snug {

const Backend& cpu_backend();
const Backend& meta_backend();
// The backend a --device value names ("cpu", "meta"); anything else is refused by name.
const Backend& backend_named(const std::string& name);

}  // namespace snug

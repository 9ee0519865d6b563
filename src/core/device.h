// A Device is where tensors live: its Backend (core/backend.h: where the bytes come from, the
// copies between it and the host, its kernel table), the MemoryPool that accounts every byte on
// it, and the host memory beside it for staging. The backends are defined above core/
// (kernels/backends.h: `cpu` runs the fast kernels on the host heap, `meta` allocates nothing and
// runs no-ops) and injected here, so code that calls `dev.ops().x(...)`, `dev.upload(...)` or
// `t.zero_()` needs no device branch, and a CUDA device is one more Backend.
//
// Host and device memory: kernels take device pointers. Host data (token ids, initial values,
// file contents) enters a tensor with upload, leaves it with download, and moves between tensors
// with copy; host-side work on a tensor's bytes (reading a file into it, a host-only op) goes
// through core/host_staging.h, which is the tensor itself where the host addresses the device's
// memory (cpu) and a staging copy in the host pool elsewhere.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/backend.h"
#include "core/memory.h"

namespace snug {

class Device {
 public:
  // ops: the kernel table; nullptr takes the backend's own. A backed device may take another
  // (cpu with ref_op_table(), for tests); an unbacked one (meta) only its own (throws otherwise).
  explicit Device(const Backend& backend, const OpTable* ops = nullptr);
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const Backend& backend() const { return *backend_; }
  const char* name() const { return backend_->name(); }
  // No bytes (a dry run): kernels, copies and zeroing are no-ops.
  bool is_meta() const { return !backend_->backed(); }
  // Host code may read and write this device's tensors directly (cpu; trivially meta).
  bool host_addressable() const { return backend_->host_addressable() || is_meta(); }
  MemoryPool& pool() { return pool_; }
  const MemoryPool& pool() const { return pool_; }
  // The kernels of this device.
  const OpTable& ops() const { return *ops_; }

  // Host memory beside this device, where host staging is allocated and counted (the
  // prefetcher's slots, core/host_staging.h): the device itself on cpu and meta, so those runs
  // count it in their one pool; a host device of its own for an accelerator (set_host), whose
  // pool the report shows beside the device's.
  Device& host() { return host_ ? *host_ : *this; }
  void set_host(Device& host) { host_ = &host; }
  // set_host with a host device this one owns (kernels/backends.h make_device).
  void own_host(std::unique_ptr<Device> host) {
    owned_host_ = std::move(host);
    host_ = owned_host_.get();
  }

  // Typed transfers of n elements (no-ops on meta): host -> device, device -> host, and
  // device -> device (dst may equal src, the ranges must not otherwise overlap).
  template <typename T>
  void upload(T* dst, const T* host_src, int64_t n) const {
    backend_->upload(dst, host_src, n * static_cast<int64_t>(sizeof(T)));
  }
  template <typename T>
  void download(T* host_dst, const T* src, int64_t n) const {
    backend_->download(host_dst, src, n * static_cast<int64_t>(sizeof(T)));
  }
  template <typename T>
  void copy(T* dst, const T* src, int64_t n) const {
    backend_->copy(dst, src, n * static_cast<int64_t>(sizeof(T)));
  }
  // dst[0, bytes) = 0 (Tensor::zero_).
  void zero(void* dst, int64_t bytes) const { backend_->zero(dst, bytes); }

 private:
  const Backend* backend_;
  MemoryPool pool_;
  const OpTable* ops_;
  Device* host_ = nullptr;
  std::unique_ptr<Device> owned_host_;
};

// Device memory presets (nominal capacities of common GPUs), e.g. "v100-16gb" -> 16 GiB, and any
// size accepted by parse_bytes ("16GiB", "24GB", "1e9"). Returns bytes.
int64_t parse_device_memory(const std::string& text);
// Every GPU preset: name and nominal capacity in bytes.
std::vector<std::pair<std::string, int64_t>> device_memory_presets();
// True when `text` names a GPU preset (rather than a size).
bool is_device_memory_preset(const std::string& text);
// "name=bytes" lines of every preset, for --help.
std::string device_memory_presets_help();

}  // namespace snug

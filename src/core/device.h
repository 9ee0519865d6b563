// A Device is where tensors live: `cpu` (real bytes, real kernels) or `meta` (shapes only: the
// pool accounts every allocation but nothing is allocated and kernels are skipped). Each device
// carries its kernel table (kernels/op_table.h): cpu runs the fast kernels (or, for tests, the
// plain references), meta runs no-ops, so code that calls `dev.ops().x(...)` needs no device
// branch. The seam for a future CUDA backend is here: a new DeviceKind with its own pool backing
// and its own table. (The table is the one place core/ points up to kernels/: a device is its
// memory plus its kernels.)
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/memory.h"

namespace snug {

enum class DeviceKind { cpu, meta };

struct OpTable;  // kernels/op_table.h

class Device {
 public:
  // ops: the kernel table; nullptr picks the kind's own (cpu: fast, meta: meta). A cpu device may
  // take ref_op_table() (tests); a meta device only the meta table (throws otherwise).
  explicit Device(DeviceKind kind, const OpTable* ops = nullptr);
  DeviceKind kind() const { return kind_; }
  bool is_meta() const { return kind_ == DeviceKind::meta; }
  const char* name() const { return kind_ == DeviceKind::meta ? "meta" : "cpu"; }
  MemoryPool& pool() { return pool_; }
  const MemoryPool& pool() const { return pool_; }
  // The kernels of this device.
  const OpTable& ops() const { return *ops_; }

 private:
  DeviceKind kind_;
  MemoryPool pool_;
  const OpTable* ops_;
};

DeviceKind parse_device_kind(const std::string& name);

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

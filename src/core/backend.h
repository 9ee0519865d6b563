// A Backend is what a Device is made of besides its accounting: where its bytes come from, how
// bytes move between it and the host and within it, how it zeroes memory, and its kernel table.
//
// Why an interface here: core/ owns tensors and their accounting (MemoryPool) but must not know
// the kernels or any accelerator library (docs/design.md, layers). A backend is defined above
// (kernels/backends.h: cpu and meta; a CUDA backend beside them later) and handed to each Device
// it makes, so adding a device adds a Backend, never a branch in core/.
//
// Memory contract: allocate returns memory of at least `bytes` (aligned as the backend's kernels
// need), or nullptr when the system refuses; the pool counts the bytes requested, not what the
// backend rounds them to. An unbacked backend (meta) allocates nothing and every copy and zero is
// a no-op on its null pointers. Host pointers passed to upload/download are ordinary host memory;
// device pointers are what allocate returned (plus offsets). Copies of 0 bytes are allowed with
// null pointers.
#pragma once

#include <cstdint>
#include <memory>

#include "core/host_heap.h"
#include "core/page_backing.h"

namespace snug {

struct OpTable;  // kernels/op_table.h: core/ holds a device's table without knowing its entries

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu", "meta" (the report's `device`).
  virtual const char* name() const = 0;
  // False for meta: an accounting-only device whose tensors have no bytes.
  virtual bool backed() const = 0;
  // True when host code may read and write this backend's memory directly (cpu). Elsewhere
  // host-side work goes through upload/download and host staging (core/host_staging.h).
  virtual bool host_addressable() const = 0;

  virtual void* allocate(int64_t bytes) const = 0;
  virtual void release(void* p, int64_t bytes) const = 0;

  // dst[0, bytes) = 0.
  virtual void zero(void* dst, int64_t bytes) const = 0;
  // host -> device, device -> host, device -> device (dst and src may be equal, not overlap).
  virtual void upload(void* dst, const void* host_src, int64_t bytes) const = 0;
  virtual void download(void* host_dst, const void* src, int64_t bytes) const = 0;
  virtual void copy(void* dst, const void* src, int64_t bytes) const = 0;

  // The kernel table of this backend (a Device may be given another one: cpu with the plain
  // reference kernels, for tests).
  virtual const OpTable& ops() const = 0;

  // A backend whose memory is reserved addresses backed page by page (cuda) gives each device
  // made on it a backing of its own (its addresses and pages, given back when the device goes):
  // the device's pool places every tensor in a paged arena over it (core/page_arena.h) and never
  // calls allocate or release. nullptr (the default): allocate and release.
  virtual std::unique_ptr<PageBacking> page_backing() const { return nullptr; }
};

// The host heap (core/host_heap.h) that the cpu backend and any host staging pool allocate from.

}  // namespace snug

// The host heap behind the cpu backend and every host staging pool: 64-byte aligned blocks.
//
// Why not plain malloc. Training frees and allocates the same large tensors every step
// (activations, 16-bit compute copies, the LM head's scratch). Served by glibc's mmap (its
// default for large blocks), every step paid page faults and zeroing for memory it had just
// released (0.10-0.15 s of a 1.5 s gpt2-124m --bf16 step on a 2-core Xeon). Kept in glibc's heap
// with trimming off (the first fix), the faults went, but the heap fragmented: blocks of
// different sizes freed between long-lived ones left resident holes that no later request fit,
// so a 7B QLoRA loaded from a bf16 folder peaked at 14.65 GiB RSS for a 5.05 GiB tracked peak
// (issue 31).
//
// So large blocks (>= kLargeBlockBytes) get their own anonymous mappings, and a freed one is
// kept, with its resident pages, for reuse: by a later request of the same page-rounded size
// as it is (the next step's same tensor), else as pages moved (mremap: page tables, not data)
// into a fresh range for a request of another size. Pages fault in only where the cache has
// too few, so live + cached large bytes never exceed the most large bytes ever live at once,
// and a run that repeats its steps stops faulting after the first. The large blocks' resident
// memory therefore stays within the tracked peak of what was asked, whatever the order of sizes.
// Small blocks stay in glibc's heap (trimming off); their fragmentation is bounded by their small
// total. Under AddressSanitizer every block is malloc'd, so the sanitizer still guards large ones.
#pragma once

#include <cstdint>

namespace snug {

// Whether large blocks are mapped and cached (false under AddressSanitizer: every block is
// malloc'd so the sanitizer guards it).
bool host_heap_maps_large_blocks();

// Blocks of at least this many bytes are mapped (and cached) rather than taken from malloc.
inline constexpr int64_t kLargeBlockBytes = int64_t{1} << 20;

// 64-byte aligned; nullptr when the system refuses. `bytes` may be 0 (a valid unique pointer).
void* host_allocate(int64_t bytes);
// Frees a block from host_allocate; `bytes` is the size it was allocated with.
void host_release(void* p, int64_t bytes);

// What the large-block cache holds now (tests and diagnostics).
struct HostHeapStats {
  int64_t live_large_bytes = 0;    // mapped and in use
  int64_t cached_large_bytes = 0;  // mapped, freed, kept for reuse
  int64_t max_live_large_bytes = 0;
  int64_t maps = 0;         // fresh address ranges mapped so far
  int64_t moves = 0;        // pieces of cached blocks moved into them (mremap)
  int64_t fresh_bytes = 0;  // bytes of those ranges no cached page covered (they fault in)
  int64_t unmaps = 0;       // cached blocks handed back to the kernel
};
HostHeapStats host_heap_stats();

}  // namespace snug

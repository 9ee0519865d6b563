// The paged arena: where a GPU pool places each tensor, so that the memory the driver holds for
// tensors stays within 2% of the tracked peak and a plan can say how much that is, to the byte.
//
// Why: a stream-ordered or caching allocator keeps freed blocks and carves later requests out of
// them; what it holds depends on the order of sizes and lifetimes, and with gradient
// checkpointing it held 13% more than the peak (docs/cuda.md). This arena instead:
//  - places blocks at offsets in reserved address ranges, best fit over an address-ordered free
//    list (coalescing neighbours), 256-byte aligned; long-lived categories (weights, optimizer
//    state, quantization state) in one range and the rest (activations, gradients, temporaries,
//    inputs, KV cache) in another, so that state made during step 1 does not pin holes among the
//    activations of the steps after it;
//  - backs the ranges page by page (kDevicePageBytes, the GPU's mapping granularity) and counts
//    the physical pages it holds. A placement on pages not yet backed takes spare pages; when
//    none is spare and more pages would pass (1 + kPageArenaSlack) x the most bytes ever live,
//    it first takes back as many backed pages no block touches as it lacks, the highest
//    addresses first (the backing keeps their old addresses valid until the device's queued work
//    has passed them), and only then asks the device for new pages.
// Physical pages are never given back during a run, so what the driver holds for tensors is
// `reserved_bytes` at the end. Everything here is bookkeeping: the same sequence of requests
// gives the same offsets and counts with or without a device (a meta plan runs it with no
// backing), which is what lets `snug plan --device cuda` state the run's reserved bytes.
// On the eight GPU memory configurations of bench/gpu/check.py of at least 1 GiB, the pages are
// within 2% of the tracked peak (docs/cuda.md#memory); best fit in one range with no take-back
// held up to 7.7% more, the stream-ordered pool 13%.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "core/page_backing.h"

namespace snug {

class PageArena {
 public:
  using Place = PagePlace;
  // backing: nullptr keeps the books alone (a plan), with unbounded ranges and pages of
  // `page_bytes`; else pages of the backing's size.
  explicit PageArena(PageBacking* backing, int64_t page_bytes = kDevicePageBytes);

  // Places `bytes` (> 0) for category c and backs its pages. nullopt: the backing refused more
  // pages or the range is full (nothing changed).
  std::optional<Place> place(int64_t bytes, Category c);
  void remove(const Place& p, int64_t bytes);
  // The block's address (nullptr without a backing).
  void* address(const Place& p) const;

  PageArenaStats stats() const;

 private:
  struct Range {
    std::map<int64_t, int64_t> free_at;          // offset -> size, address order
    std::set<std::pair<int64_t, int64_t>> fits;  // (size, offset): best fit
    int64_t top = 0;                             // first offset past every block
    int64_t high = 0;                            // the highest top
    std::vector<int32_t> users;                  // blocks touching each page
    std::vector<uint8_t> mapped;                 // page backed
  };
  void add_free(Range& r, int64_t offset, int64_t size);
  void take_free(Range& r, std::map<int64_t, int64_t>::iterator it);
  // Backs every unbacked page of [first, last] in range ri for a block of `size` bytes; false:
  // the device refused pages (the block is not placed).
  bool back_pages(int ri, int64_t first, int64_t last, int64_t size);
  // Takes back up to `wanted` backed pages no block touches (none of [first_skip, last_skip] of
  // range ri_skip, the placement's own), in one take-back.
  void take_back(int64_t wanted, int ri_skip, int64_t first_skip, int64_t last_skip);

  PageBacking* backing_;
  Range ranges_[kPageArenaRanges];
  int64_t spare_ = 0;  // physical pages made and not mapped
  PageArenaStats s_;   // virtual_bytes left 0: stats() sums the ranges' highs
};

}  // namespace snug

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
//    it first takes back every backed page no block touches (after the device's queued work is
//    done with them), and only then asks the device for new pages.
// Physical pages are never given back during a run, so what the driver holds for tensors is
// `reserved_bytes` at the end. Everything here is bookkeeping: the same sequence of requests
// gives the same offsets and counts with or without a device (a meta plan runs it with no
// backing), which is what lets `snug plan --device cuda` state the run's reserved bytes.
// Simulated on the timelines of the ten GPU memory configurations (bench/gpu/check.py MEMORY):
// within 2% of the tracked peak in all; best fit in one range with no take-back: up to 7.7%.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace snug {

enum class Category : uint8_t;  // core/memory.h

inline constexpr int64_t kDevicePageBytes = int64_t{2} << 20;  // 2 MiB
inline constexpr int64_t kPageArenaAlign = 256;
inline constexpr double kPageArenaSlack = 0.02;
inline constexpr int kPageArenaRanges = 2;  // 0: long-lived categories, 1: the rest

// The range a category's blocks go to.
int page_arena_range(Category c);

// What backs the ranges: reserved addresses and physical pages (CUDA's virtual memory API; a
// host stand-in in tests). Pages are numbered within a range from its base.
class PageBacking {
 public:
  virtual ~PageBacking() = default;
  // The size of a page (kDevicePageBytes on a GPU).
  virtual int64_t page_bytes() const = 0;
  // The first address of range r.
  virtual char* base(int r) const = 0;
  // Pages reserved per range (a placement past it is refused).
  virtual int64_t range_pages() const = 0;
  // Makes n more physical pages, held spare. False: the device has no more memory.
  virtual bool grow(int64_t n) = 0;
  // Backs pages [first, first + n) of range r with n spare pages.
  virtual void map(int r, int64_t first, int64_t n) = 0;
  // Waits until the device's queued work is done, then returns the pages of each run to the
  // spares (runs: range, first page, count).
  struct Run {
    int range;
    int64_t first;
    int64_t count;
  };
  virtual void unmap(const std::vector<Run>& runs) = 0;
};

struct PageArenaStats {
  int64_t page_bytes = 0;
  int64_t physical_pages = 0;  // pages made (never given back): reserved_bytes / page_bytes
  int64_t mapped_pages = 0;    // backed now
  int64_t virtual_bytes = 0;   // the highest offset ever used, summed over the ranges
  int64_t live_bytes = 0;      // aligned bytes of the blocks placed now
  int64_t max_live_bytes = 0;
  int64_t maps = 0;    // pages backed (first backing and again after a take-back)
  int64_t unmaps = 0;  // pages taken back
  int64_t waits = 0;   // take-backs (each waits for the device's queued work)
  int64_t reserved_bytes() const { return physical_pages * page_bytes; }
};

class PageArena {
 public:
  struct Place {
    int range = 0;
    int64_t offset = 0;
  };
  // backing: nullptr keeps the books alone (a plan), with unbounded ranges and pages of
  // `page_bytes`; else pages of the backing's size.
  explicit PageArena(PageBacking* backing, int64_t page_bytes = kDevicePageBytes);

  // Places `bytes` (> 0) for category c and backs its pages. nullopt: the backing refused more
  // pages or the range is full (nothing changed).
  std::optional<Place> place(int64_t bytes, Category c);
  void remove(const Place& p, int64_t bytes);
  // The block's address (nullptr without a backing).
  void* address(const Place& p) const;

  const PageArenaStats& stats() const { return s_; }

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
  void take_back(int ri_skip, int64_t first_skip, int64_t last_skip);

  PageBacking* backing_;
  Range ranges_[kPageArenaRanges];
  int64_t spare_ = 0;  // physical pages made and not mapped
  PageArenaStats s_;
};

}  // namespace snug

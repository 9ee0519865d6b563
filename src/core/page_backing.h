// The interface between a pool's paged arena (core/page_arena.h) and what backs it: the page
// size and constants of the arena, the backing (reserved addresses and physical pages: a GPU's,
// kernels/cuda/pages.cu, or a host stand-in in tests), where a block was placed, and the figures
// the report gives (memory.pages). Apart from page_arena.h so that the headers every file
// includes (core/memory.h, core/backend.h) do not change when the arena's insides do.
#pragma once

#include <cstdint>
#include <vector>

namespace snug {

enum class Category : uint8_t;  // core/memory.h

inline constexpr int64_t kDevicePageBytes = int64_t{2} << 20;  // 2 MiB
inline constexpr int64_t kPageArenaAlign = 256;
inline constexpr double kPageArenaSlack = 0.02;
inline constexpr int kPageArenaRanges = 2;  // 0: long-lived categories, 1: the rest

// The range a category's blocks go to.
int page_arena_range(Category c);

// Where a block was placed: its range and its offset from the range's base.
struct PagePlace {
  int range = 0;
  int64_t offset = 0;
};

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
  // Returns the pages of each run to the spares (runs: range, first page, count). Work queued
  // before may still use them at their old addresses: the backing keeps those valid until the
  // device has passed it (a GPU's backing maps a spare page at its new place without waiting).
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
  int64_t maps = 0;        // pages backed (first backing and again after a take-back)
  int64_t unmaps = 0;      // pages taken back
  int64_t take_backs = 0;  // take-backs of idle pages (one event each; no wait)
  int64_t reserved_bytes() const { return physical_pages * page_bytes; }
};

}  // namespace snug

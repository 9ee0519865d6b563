#include "core/page_arena.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/memory.h"

namespace snug {

int page_arena_range(Category c) {
  switch (c) {
    case Category::weights:
    case Category::optimizer_state:
    case Category::quant_state:
      return 0;
    default:
      return 1;
  }
}

PageArena::PageArena(PageBacking* backing, int64_t page_bytes) : backing_(backing) {
  if (backing) page_bytes = backing->page_bytes();
  SNUG_CHECK(page_bytes > 0 && page_bytes % kPageArenaAlign == 0,
             "page arena: page size must be a positive multiple of ", kPageArenaAlign);
  s_.page_bytes = page_bytes;
}

void PageArena::add_free(Range& r, int64_t offset, int64_t size) {
  // Coalesce with the free neighbours, then give a block that ends at the top back to the top.
  auto next = r.free_at.lower_bound(offset);
  if (next != r.free_at.end() && offset + size == next->first) {
    size += next->second;
    r.fits.erase({next->second, next->first});
    next = r.free_at.erase(next);
  }
  if (next != r.free_at.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      size += prev->second;
      r.fits.erase({prev->second, prev->first});
      r.free_at.erase(prev);
    }
  }
  if (offset + size == r.top) {
    r.top = offset;
    return;
  }
  r.free_at.emplace(offset, size);
  r.fits.insert({size, offset});
}

void PageArena::take_free(Range& r, std::map<int64_t, int64_t>::iterator it) {
  r.fits.erase({it->second, it->first});
  r.free_at.erase(it);
}

std::optional<PageArena::Place> PageArena::place(int64_t bytes, Category c) {
  SNUG_ASSERT(bytes > 0);
  const int64_t size = (bytes + kPageArenaAlign - 1) / kPageArenaAlign * kPageArenaAlign;
  const int ri = page_arena_range(c);
  Range& r = ranges_[ri];
  // Best fit: the smallest free block that holds it, the lowest address among equals; else the
  // top (free blocks never touch the top: add_free gives those back to it).
  const auto fit = r.fits.lower_bound({size, 0});
  const bool from_free = fit != r.fits.end();
  const int64_t offset = from_free ? fit->second : r.top;
  const int64_t page = s_.page_bytes;
  const int64_t first = offset / page, last = (offset + size - 1) / page;
  const int64_t limit =
      backing_ ? backing_->range_pages() : std::numeric_limits<int64_t>::max() / page;
  if (last >= limit) return std::nullopt;
  if (static_cast<int64_t>(r.users.size()) <= last) {
    r.users.resize(static_cast<size_t>(last + 1), 0);
    r.mapped.resize(static_cast<size_t>(last + 1), 0);
  }
  if (!back_pages(ri, first, last, size)) return std::nullopt;
  if (from_free) {
    const int64_t free_size = fit->first;
    take_free(r, r.free_at.find(offset));
    if (free_size > size) {
      r.free_at.emplace(offset + size, free_size - size);
      r.fits.insert({free_size - size, offset + size});
    }
  } else {
    r.top = offset + size;
    r.high = std::max(r.high, r.top);
  }
  for (int64_t p = first; p <= last; ++p) ++r.users[static_cast<size_t>(p)];
  s_.live_bytes += size;
  s_.max_live_bytes = std::max(s_.max_live_bytes, s_.live_bytes);
  return Place{ri, offset};
}

bool PageArena::back_pages(int ri, int64_t first, int64_t last, int64_t size) {
  Range& r = ranges_[ri];
  int64_t need = 0;
  for (int64_t p = first; p <= last; ++p) need += r.mapped[static_cast<size_t>(p)] ? 0 : 1;
  if (need == 0) return true;
  if (need > spare_) {
    // More pages than the slack allows over the most bytes ever live (this block included):
    // take back as many backed pages no block touches as it lacks before asking for new ones.
    const int64_t most_live = std::max(s_.max_live_bytes, s_.live_bytes + size);
    const double allowed = static_cast<double>(most_live) * (1.0 + kPageArenaSlack) +
                           static_cast<double>(2 * kPageArenaRanges * s_.page_bytes);
    if (static_cast<double>((s_.physical_pages + need - spare_) * s_.page_bytes) > allowed)
      take_back(need - spare_, ri, first, last);
  }
  if (need > spare_) {
    // The device may refuse pages the slack allowed: then take back idle ones and try again.
    if (backing_ && !backing_->grow(need - spare_)) {
      take_back(need - spare_, ri, first, last);
      if (need > spare_ && !backing_->grow(need - spare_)) return false;
    }
    if (need > spare_) {
      s_.physical_pages += need - spare_;
      spare_ = need;
    }
  }
  // Back the unbacked runs of [first, last].
  for (int64_t p = first; p <= last;) {
    if (r.mapped[static_cast<size_t>(p)]) {
      ++p;
      continue;
    }
    int64_t q = p;
    while (q <= last && !r.mapped[static_cast<size_t>(q)]) r.mapped[static_cast<size_t>(q++)] = 1;
    if (backing_) backing_->map(ri, p, q - p);
    spare_ -= q - p;
    s_.mapped_pages += q - p;
    s_.maps += q - p;
    p = q;
  }
  return true;
}

void PageArena::take_back(int64_t wanted, int ri_skip, int64_t first_skip, int64_t last_skip) {
  // The idle pages at the highest addresses first: the rest range's, then the long-lived one's.
  // Best fit reuses low addresses first, so these are the pages the next placements are least
  // likely to want again. In a Python replay of steady steps this took back 4-20x fewer pages
  // per step than taking every idle page, for up to 0.9 points more of the peak (docs/cuda.md).
  std::vector<PageBacking::Run> runs;
  int64_t pages = 0;
  for (int ri = kPageArenaRanges - 1; ri >= 0 && pages < wanted; --ri) {
    Range& r = ranges_[ri];
    for (int64_t p = static_cast<int64_t>(r.mapped.size()) - 1; p >= 0 && pages < wanted; --p) {
      const auto i = static_cast<size_t>(p);
      if (!r.mapped[i] || r.users[i] != 0 || (ri == ri_skip && p >= first_skip && p <= last_skip))
        continue;
      r.mapped[i] = 0;
      ++pages;
      if (!runs.empty() && runs.back().range == ri && runs.back().first == p + 1) {
        --runs.back().first;
        ++runs.back().count;
      } else {
        runs.push_back({ri, p, 1});
      }
    }
  }
  if (runs.empty()) return;
  if (backing_) backing_->unmap(runs);
  spare_ += pages;
  s_.mapped_pages -= pages;
  s_.unmaps += pages;
  ++s_.take_backs;
}

void PageArena::remove(const Place& pl, int64_t bytes) {
  SNUG_ASSERT(bytes > 0 && pl.range >= 0 && pl.range < kPageArenaRanges);
  const int64_t size = (bytes + kPageArenaAlign - 1) / kPageArenaAlign * kPageArenaAlign;
  Range& r = ranges_[pl.range];
  const int64_t first = pl.offset / s_.page_bytes, last = (pl.offset + size - 1) / s_.page_bytes;
  for (int64_t p = first; p <= last; ++p) {
    SNUG_ASSERT(r.users[static_cast<size_t>(p)] > 0, "page arena: freeing a page no block uses");
    --r.users[static_cast<size_t>(p)];
  }
  s_.live_bytes -= size;
  add_free(r, pl.offset, size);
}

PageArenaStats PageArena::stats() const {
  PageArenaStats s = s_;
  for (const Range& r : ranges_) s.virtual_bytes += r.high;
  return s;
}

void* PageArena::address(const Place& p) const {
  return backing_ ? backing_->base(p.range) + p.offset : nullptr;
}

}  // namespace snug

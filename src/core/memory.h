// Tracked memory: every tensor byte snug holds comes from a MemoryPool and carries a Category.
//
// The pool keeps, per category, the live bytes and that category's own maximum; the global live
// and peak; the per-category breakdown at the moment of the global peak; allocation and free
// counts; an optional event timeline; and an optional capacity that it enforces exactly as a
// GPU would (an allocation that would exceed it throws OutOfMemoryError with the breakdown).
//
// Accounting unit: the bytes requested. The bytes themselves come from the pool's backing, the
// Backend of its device (core/backend.h): on cpu the host heap, rounded up to a 64-byte multiple
// for alignment; that padding is not counted (at most 63 bytes per tensor; for GPT-2 124M that is
// under 0.001% of the weights). A meta pool accounts identically but allocates nothing, which is
// what makes a dry run equal to a real run to the byte. On a device whose backend gives pages
// (cuda) the pool places every block in a paged arena of its own (core/page_arena.h) and reports
// its pages (MemoryStats::pages); a plan for such a device keeps the same books with no pages.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/page_backing.h"

namespace snug {

class Backend;    // core/backend.h
class PageArena;  // core/page_arena.h

// X-macro: the one list of categories; names are used verbatim in reports and JSON.
#define SNUG_CATEGORIES(X) \
  X(weights)               \
  X(gradients)             \
  X(optimizer_state)       \
  X(activations)           \
  X(temporary)             \
  X(kv_cache)              \
  X(quant_state)           \
  X(input_data)

enum class Category : uint8_t {
#define SNUG_ENUM_ENTRY(name) name,
  SNUG_CATEGORIES(SNUG_ENUM_ENTRY)
#undef SNUG_ENUM_ENTRY
};

#define SNUG_COUNT_ENTRY(name) +1
inline constexpr int kNumCategories = 0 SNUG_CATEGORIES(SNUG_COUNT_ENTRY);
#undef SNUG_COUNT_ENTRY

const char* category_name(Category c);
Category parse_category(const std::string& name);
inline constexpr Category category_at(int i) {
  return static_cast<Category>(i);
}

using ByCategory = std::array<int64_t, kNumCategories>;

// Bytes in MiB (2^20 bytes), for tables and messages.
inline constexpr double mib(int64_t bytes) {
  return static_cast<double>(bytes) / (1024.0 * 1024.0);
}

// One allocation (+bytes) or free (-bytes) as recorded on the timeline.
struct MemoryEvent {
  double time_s;  // since the pool was created
  int64_t bytes;  // + allocation, - free
  Category category;
  int64_t live_total;  // after this event
  std::string phase;   // the phase label set at the time (e.g. "forward h.3", "optimizer")
  int64_t block = 0;   // the allocation's number (1, 2, ... in order); a free carries the
                       // number of the allocation it ends
};

// What the pool hands a tensor's storage: the bytes (nullptr on meta and for 0 bytes) and the
// allocation's number, which the storage gives back when it frees them.
struct PoolBlock {
  void* ptr = nullptr;
  int64_t id = 0;
};

struct MemoryStats {
  ByCategory live{};              // bytes live now
  ByCategory max_by_category{};   // each category's own maximum
  ByCategory peak_by_category{};  // breakdown at the moment of the global peak
  int64_t live_total = 0;
  int64_t peak_total = 0;
  std::string peak_phase;  // phase label when the global peak was reached
  int64_t alloc_count = 0;
  int64_t free_count = 0;
  // A pool that places its blocks in a paged arena (a GPU's, or a plan for one): its pages.
  std::optional<PageArenaStats> pages;
};

class MemoryPool {
 public:
  // backing: where the bytes come from; nullptr or an unbacked backend (meta): accounting only,
  // allocate returns nullptr. The backing must outlive the pool.
  explicit MemoryPool(const Backend* backing);
  ~MemoryPool();
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  // Returns the backing's memory for `bytes` (nullptr on meta or for 0 bytes) and its number.
  // Throws OutOfMemoryError if a capacity is set and live + bytes would exceed it.
  PoolBlock allocate(int64_t bytes, Category c);
  void release(const PoolBlock& b, int64_t bytes, Category c);

  // Places every block in a paged arena (core/page_arena.h) backed by `backing`, which the pool
  // keeps (nullptr: the books alone, as a plan for a GPU keeps them, with pages of
  // `page_bytes`). Before the first allocation.
  void use_pages(std::unique_ptr<PageBacking> backing, int64_t page_bytes = kDevicePageBytes);
  bool paged() const { return arena_ != nullptr; }

  void set_capacity(std::optional<int64_t> bytes);
  std::optional<int64_t> capacity() const { return capacity_; }
  bool backed() const { return backed_; }

  // A short label of what the program is doing, kept with timeline events and the peak.
  void set_phase(std::string phase);
  const std::string& phase() const { return phase_; }

  MemoryStats stats() const;
  int64_t live(Category c) const;
  int64_t live_total() const;
  // Resets peaks and maxima to the current live values (as torch.cuda.reset_peak_memory_stats).
  void reset_peak();

  void enable_timeline(bool on);
  std::vector<MemoryEvent> timeline() const;

 private:
  void record(int64_t delta, Category c, int64_t block);
  // The out-of-memory message: what was asked, the phase, what is live by category; `why` follows
  // the bytes in use (the capacity, or the device's refusal). Called with mu_ held.
  std::string budget_report(int64_t bytes, Category c, const std::string& why) const;
  // The budget report when the device itself refuses `what` more ("" or " pages"): why it did.
  std::string refused_report(int64_t bytes, Category c, const std::string& what,
                             const std::string& why) const;
  // Throws the budget report when `bytes` more would pass the capacity (or 2^63).
  void check_fits(int64_t bytes, Category c) const;
  void check_fits_locked(int64_t bytes, Category c) const;  // caller holds mu_
  PoolBlock allocate_paged(int64_t bytes, Category c);

  const Backend* backing_;
  bool backed_;
  std::optional<int64_t> capacity_;
  mutable std::mutex mu_;
  MemoryStats s_;
  std::string phase_;
  bool timeline_on_ = false;
  std::vector<MemoryEvent> events_;
  int64_t next_block_ = 1;
  std::unique_ptr<PageBacking> pages_;  // before arena_: the arena goes first
  std::unique_ptr<PageArena> arena_;
  std::unordered_map<int64_t, PagePlace> places_;  // block number -> place (paged)
  double t0_;
};

// "1.23 GiB"-style human formatting and parsing of sizes ("16GiB", "512MB", "1e9", "123").
std::string format_bytes(int64_t bytes);
int64_t parse_bytes(const std::string& text);

}  // namespace snug

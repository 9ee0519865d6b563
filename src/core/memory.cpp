#include "core/memory.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/backend.h"
#include "core/error.h"
#include "core/page_arena.h"

namespace snug {

namespace {
double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

const char* category_name(Category c) {
  static constexpr const char* kNames[] = {
#define SNUG_NAME_ENTRY(name) #name,
      SNUG_CATEGORIES(SNUG_NAME_ENTRY)
#undef SNUG_NAME_ENTRY
  };
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kNumCategories);
  return kNames[static_cast<int>(c)];
}

Category parse_category(const std::string& name) {
  for (int i = 0; i < kNumCategories; ++i)
    if (name == category_name(category_at(i))) return category_at(i);
  throw Error("unknown memory category '" + name + "'");
}

MemoryPool::MemoryPool(const Backend* backing)
    : backing_(backing), backed_(backing != nullptr && backing->backed()), t0_(now_s()) {}
MemoryPool::~MemoryPool() = default;

std::string MemoryPool::budget_report(int64_t bytes, Category c, const std::string& why) const {
  std::string msg = detail::concat("out of memory: tried to allocate ", format_bytes(bytes), " (",
                                   bytes, " bytes) for ", category_name(c), " during '",
                                   phase_.empty() ? "setup" : phase_, "'; ",
                                   format_bytes(s_.live_total), why, "\n  live by category:");
  for (int i = 0; i < kNumCategories; ++i)
    msg += detail::concat("\n    ", category_name(category_at(i)), ": ", format_bytes(s_.live[i]));
  msg +=
      "\n  hint: the same command with --device meta and no --device-memory shows the whole "
      "need";
  return msg;
}

std::string MemoryPool::refused_report(int64_t bytes, Category c, const std::string& what,
                                       const std::string& why) const {
  const std::string who = !backing_                      ? "device"
                          : backing_->host_addressable() ? "host"
                                                         : backing_->name();
  return budget_report(
      bytes, c,
      detail::concat(" already in use, and the ", who, " refused more", what, " (", why,
                     "; --device-memory set below what it has turns this into "
                     "a planned stop)."));
}

PoolBlock MemoryPool::allocate(int64_t bytes, Category c) {
  SNUG_ASSERT(bytes >= 0);
  // Checked before the backing allocates (no memory taken for a request that cannot fit) and
  // again when the bytes are recorded (another thread may have allocated in between). The bytes
  // are recorded only once the backing has them, so a refused request is in no peak.
  if (arena_) return allocate_paged(bytes, c);
  check_fits(bytes, c);
  void* p = (!backed_ || bytes == 0) ? nullptr : backing_->allocate(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (backed_ && bytes > 0 && !p) {
    // The device itself refused (a GPU's memory is full: other processes, the context, the
    // allocator's rounding): the same budget report as a --device-memory capacity gives.
    throw OutOfMemoryError(refused_report(bytes, c, "", "its memory is full"));
  }
  try {
    check_fits_locked(bytes, c);
  } catch (...) {
    if (p) backing_->release(p, bytes);
    throw;
  }
  const int64_t id = next_block_++;
  record(bytes, c, id);
  return {p, id};
}

PoolBlock MemoryPool::allocate_paged(int64_t bytes, Category c) {
  std::lock_guard<std::mutex> lock(mu_);
  check_fits_locked(bytes, c);
  const int64_t id = next_block_++;
  void* p = nullptr;
  if (bytes > 0) {
    const std::optional<PagePlace> where = arena_->place(bytes, c);
    if (!where)
      throw OutOfMemoryError(
          refused_report(bytes, c, " pages",
                         format_bytes(arena_->stats().reserved_bytes()) + " held for tensors"));
    places_.emplace(id, *where);
    p = arena_->address(*where);
  }
  record(bytes, c, id);
  return {p, id};
}

void MemoryPool::use_pages(std::unique_ptr<PageBacking> backing, int64_t page_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  SNUG_CHECK(s_.alloc_count == 0, "a pool takes its page arena before its first allocation");
  pages_ = std::move(backing);
  arena_ = std::make_unique<PageArena>(pages_.get(), page_bytes);
}

void MemoryPool::check_fits(int64_t bytes, Category c) const {
  std::lock_guard<std::mutex> lock(mu_);
  check_fits_locked(bytes, c);
}

void MemoryPool::check_fits_locked(int64_t bytes, Category c) const {
  // Sizes that add up past 64 bits (a dry run of an absurd shape has no capacity to stop it).
  if (bytes > std::numeric_limits<int64_t>::max() - s_.live_total)
    throw OutOfMemoryError(detail::concat("out of memory: ", format_bytes(s_.live_total),
                                          " in use and ", format_bytes(bytes), " more for ",
                                          category_name(c), " exceed 2^63 bytes"));
  if (capacity_ && s_.live_total + bytes > *capacity_)
    throw OutOfMemoryError(
        budget_report(bytes, c,
                      detail::concat(" already in use of the device capacity ",
                                     format_bytes(*capacity_), " (", *capacity_, " bytes), ",
                                     format_bytes(*capacity_ - s_.live_total), " free.")));
}

void MemoryPool::release(const PoolBlock& b, int64_t bytes, Category c) {
  if (arena_) {
    std::lock_guard<std::mutex> lock(mu_);
    if (bytes > 0) {
      const auto it = places_.find(b.id);
      SNUG_ASSERT(it != places_.end(), "freeing block ", b.id, " that the page arena never placed");
      arena_->remove(it->second, bytes);
      places_.erase(it);
    }
    record(-bytes, c, b.id);
    return;
  }
  if (b.ptr) backing_->release(b.ptr, bytes);
  std::lock_guard<std::mutex> lock(mu_);
  record(-bytes, c, b.id);
}

void MemoryPool::record(int64_t delta, Category c, int64_t block) {
  const int i = static_cast<int>(c);
  s_.live[i] += delta;
  s_.live_total += delta;
  SNUG_ASSERT(s_.live[i] >= 0, "category ", category_name(c), " went negative");
  if (delta >= 0) {
    ++s_.alloc_count;
    if (s_.live[i] > s_.max_by_category[i]) s_.max_by_category[i] = s_.live[i];
    if (s_.live_total > s_.peak_total) {
      s_.peak_total = s_.live_total;
      s_.peak_by_category = s_.live;
      s_.peak_phase = phase_;
    }
  } else {
    ++s_.free_count;
  }
  if (timeline_on_) events_.push_back({now_s() - t0_, delta, c, s_.live_total, phase_, block});
}

void MemoryPool::set_capacity(std::optional<int64_t> bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  capacity_ = bytes;
}

void MemoryPool::set_phase(std::string phase) {
  std::lock_guard<std::mutex> lock(mu_);
  phase_ = std::move(phase);
}

MemoryStats MemoryPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  MemoryStats s = s_;
  if (arena_) s.pages = arena_->stats();
  return s;
}

int64_t MemoryPool::live(Category c) const {
  std::lock_guard<std::mutex> lock(mu_);
  return s_.live[static_cast<int>(c)];
}

int64_t MemoryPool::live_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return s_.live_total;
}

void MemoryPool::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  s_.max_by_category = s_.live;
  s_.peak_by_category = s_.live;
  s_.peak_total = s_.live_total;
  s_.peak_phase = phase_;
}

void MemoryPool::enable_timeline(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  timeline_on_ = on;
}

std::vector<MemoryEvent> MemoryPool::timeline() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

std::string format_bytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (std::fabs(v) >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  char buf[64];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  return buf;
}

int64_t parse_bytes(const std::string& text) {
  // A plain count of bytes is exact: through a double, 2^63-1 would round to 2^63 and be refused.
  int64_t exact = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), exact);
  if (ec == std::errc() && end == text.data() + text.size() && exact >= 0 && !text.empty())
    return exact;
  size_t pos = 0;
  double v = 0;
  try {
    v = std::stod(text, &pos);
  } catch (...) {
    throw Error("cannot read '" + text + "' as a size (examples: 16GiB, 512MB, 1e9, 123456)");
  }
  std::string unit = text.substr(pos);
  for (auto& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double mult = 1;
  if (unit.empty() || unit == "b")
    mult = 1;
  else if (unit == "kib" || unit == "ki")
    mult = 1024.0;
  else if (unit == "mib" || unit == "mi")
    mult = 1024.0 * 1024;
  else if (unit == "gib" || unit == "gi")
    mult = 1024.0 * 1024 * 1024;
  else if (unit == "tib" || unit == "ti")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "kb" || unit == "k")
    mult = 1e3;
  else if (unit == "mb" || unit == "m")
    mult = 1e6;
  else if (unit == "gb" || unit == "g")
    mult = 1e9;
  else if (unit == "tb" || unit == "t")
    mult = 1e12;
  else
    throw Error("unknown size unit '" + unit + "' in '" + text +
                "' (use B, KiB, MiB, GiB, KB, MB, GB)");
  SNUG_CHECK(!std::isnan(v), "size '", text, "' is out of range (not a number)");
  SNUG_CHECK(v >= 0, "size '", text, "' is negative");
  // 2^63 bytes and beyond (or inf) would wrap to a negative int64.
  const double bytes = std::round(v * mult);
  SNUG_CHECK(bytes < 9223372036854775808.0, "size '", text,
             "' is out of range (at most 2^63-1 bytes)");
  return static_cast<int64_t>(bytes);
}

}  // namespace snug

#include "core/host_heap.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <list>
#include <mutex>

#if defined(__SANITIZE_ADDRESS__)
#define SNUG_HOST_HEAP_MALLOC_ONLY 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SNUG_HOST_HEAP_MALLOC_ONLY 1
#endif
#endif
#ifndef SNUG_HOST_HEAP_MALLOC_ONLY
#define SNUG_HOST_HEAP_MALLOC_ONLY 0
#endif

namespace snug {

namespace {
constexpr int64_t kAlign = 64;

// Small blocks: glibc's heap, never handed back by mmap or trimming (host_heap.h says why).
bool keep_small_blocks_in_heap() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  return true;
}

void* small_allocate(int64_t bytes) {
  static const bool tuned = keep_small_blocks_in_heap();
  (void)tuned;
  const int64_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  return std::aligned_alloc(kAlign, static_cast<size_t>(rounded == 0 ? kAlign : rounded));
}

class LargeBlocks {
 public:
  void* allocate(int64_t bytes) {
    const int64_t size = page_round(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = cached_.rbegin(); it != cached_.rend(); ++it) {  // this size, the newest first
      if (it->size != size) continue;
      void* p = it->p;
      cached_.erase(std::next(it).base());
      s_.cached_large_bytes -= size;
      take(size);
      return p;
    }
    // Another size: a fresh address range whose pages are moved over from cached blocks (the
    // largest first, so a block splits into few pieces): mremap moves page tables, not data, so
    // only what the cache cannot cover faults in, and live + cached stays as it was (or, the
    // cache used up, equals the live bytes).
    char* r = static_cast<char*>(mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (r == MAP_FAILED) return nullptr;
    ++s_.maps;
    int64_t filled = 0;
    while (filled < size && !cached_.empty()) {
      auto b = std::max_element(cached_.begin(), cached_.end(),
                                [](const Block& x, const Block& y) { return x.size < y.size; });
      const int64_t n = std::min(b->size, size - filled);
      if (mremap(b->p, static_cast<size_t>(n), static_cast<size_t>(n),
                 MREMAP_MAYMOVE | MREMAP_FIXED, r + filled) == MAP_FAILED)
        break;  // (the kernel's mapping limit): the rest faults in fresh
      ++s_.moves;
      if (n == b->size) {
        cached_.erase(b);
      } else {
        b->p = static_cast<char*>(b->p) + n;
        b->size -= n;
      }
      s_.cached_large_bytes -= n;
      filled += n;
    }
    s_.fresh_bytes += size - filled;
    take(size);
    // Only after a failed move can live + cached pass the most ever live: unmap the oldest.
    while (!cached_.empty() &&
           s_.live_large_bytes + s_.cached_large_bytes > s_.max_live_large_bytes) {
      const Block old = cached_.front();
      cached_.pop_front();
      s_.cached_large_bytes -= old.size;
      ++s_.unmaps;
      munmap(old.p, static_cast<size_t>(old.size));
    }
    return r;
  }

  void release(void* p, int64_t bytes) {
    const int64_t size = page_round(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    s_.live_large_bytes -= size;
    // live + cached is unchanged by keeping it, so the bound still holds.
    cached_.push_back(Block{p, size});
    s_.cached_large_bytes += size;
  }

  HostHeapStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return s_;
  }

 private:
  struct Block {
    void* p;
    int64_t size;
  };
  static int64_t page_round(int64_t bytes) {
    static const int64_t page = sysconf(_SC_PAGESIZE);
    return (bytes + page - 1) / page * page;
  }
  void take(int64_t size) {
    s_.live_large_bytes += size;
    s_.max_live_large_bytes = std::max(s_.max_live_large_bytes, s_.live_large_bytes);
  }

  std::mutex mu_;
  std::list<Block> cached_;  // in the order freed
  HostHeapStats s_;
};

LargeBlocks& large_blocks() {
  static LargeBlocks* blocks = new LargeBlocks;  // never destroyed: tensors may outlive statics
  return *blocks;
}
}  // namespace

void* host_allocate(int64_t bytes) {
  if (SNUG_HOST_HEAP_MALLOC_ONLY || bytes < kLargeBlockBytes) return small_allocate(bytes);
  return large_blocks().allocate(bytes);
}

void host_release(void* p, int64_t bytes) {
  if (p == nullptr) return;
  if (SNUG_HOST_HEAP_MALLOC_ONLY || bytes < kLargeBlockBytes) {
    std::free(p);
    return;
  }
  large_blocks().release(p, bytes);
}

bool host_heap_maps_large_blocks() {
  return !SNUG_HOST_HEAP_MALLOC_ONLY;
}

HostHeapStats host_heap_stats() {
  return large_blocks().stats();
}

}  // namespace snug

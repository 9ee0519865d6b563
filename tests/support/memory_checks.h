// What "a dry run on meta equals the cpu run" checks of two runs' MemoryStats (core/memory.h).
#pragma once

#include <gtest/gtest.h>

#include "core/memory.h"

namespace snug::test {

// One category's bytes of a by-category array (MemoryStats::live, max_by_category, ...).
inline int64_t at(const ByCategory& b, Category c) {
  return b[static_cast<int>(c)];
}

// The peak, every category's maximum, what the program was doing at the peak and the number of
// allocations: equal to the byte (and the count).
inline void expect_meta_equals_cpu(const MemoryStats& meta, const MemoryStats& cpu) {
  EXPECT_EQ(meta.peak_total, cpu.peak_total);
  EXPECT_EQ(meta.max_by_category, cpu.max_by_category);
  EXPECT_EQ(meta.peak_phase, cpu.peak_phase);
  EXPECT_EQ(meta.alloc_count, cpu.alloc_count);
}

}  // namespace snug::test

// libFuzzer target: snug::fuzz::jsonl_records (fuzz/entry_points.h). Built with -DSNUG_FUZZ=ON
// (clang).
#include <cstddef>
#include <cstdint>

#include "fuzz/entry_points.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  snug::fuzz::jsonl_records(data, size);
  return 0;
}

// libFuzzer target: snug::fuzz::adapter_folder (fuzz/entry_points.h). Built with -DSNUG_FUZZ=ON
// (clang).
#include <cstddef>
#include <cstdint>

#include "fuzz/entry_points.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)snug::fuzz::adapter_folder(data, size);
  return 0;
}

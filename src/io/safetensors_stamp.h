// The stamp of a safetensors file that a run record keeps (train/run_record.h): its size and the
// hash of its header, without reading its data. Defined beside the reader (io/safetensors.cpp),
// whose header checks it shares.
#pragma once

#include <cstdint>
#include <string>

namespace snug {

// What a run record keeps of a weights file without reading its data (train/run_record.h): its
// size and the FNV-1a 64 of its first 8 + N bytes, the header's length and the JSON header (every
// tensor's name, dtype, shape and offsets). Hashing the data too read a 7B model's 14 GB on every
// run that saves checkpoints. Refuses (naming `path`) what is not a regular file or whose header
// length does not fit the file or the 100 MB limit; the JSON itself is not parsed.
struct SafetensorsStamp {
  int64_t size = 0;
  uint64_t header_fnv1a64 = 0;
};
SafetensorsStamp safetensors_stamp(const std::string& path);

}  // namespace snug

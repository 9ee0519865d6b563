// FNV-1a 64 (offset basis 0xcbf29ce484222325, prime 0x100000001b3): the checksum checkpoints
// and run records keep for their files. It catches flipped bytes and truncation, not deliberate
// tampering; that is all a resume needs to refuse a damaged checkpoint or a changed data file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace snug {

// FNV-1a 64 over `bytes`, continuing from `h` (the offset basis by default).
uint64_t fnv1a64(std::string_view bytes, uint64_t h = 0xcbf29ce484222325ULL);
// FNV-1a 64 over the bytes of `path` (throws snug::Error naming the file if unreadable).
uint64_t fnv1a64_file(const std::string& path);
// 16 lowercase hex digits, as the records store a checksum.
std::string hex64(uint64_t v);

}  // namespace snug

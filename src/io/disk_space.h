// Free disk space, checked before a large write (a checkpoint of a 7B model is 14-28 GB): a save
// that cannot fit is refused before the first byte is written, naming the bytes needed and free,
// instead of failing half-way with ENOSPC (and leaving a *.tmp folder that fills the disk).
//
// The free space is statvfs(dir).f_bavail * f_frsize: the bytes an unprivileged process may
// still allocate there. Tests cannot make a small filesystem without root, so the environment
// variable SNUG_FREE_DISK_BYTES=<bytes> (a non-negative integer) replaces the query when set: a
// test sets it to make a save "not fit", as a tiny tmpfs would.
#pragma once

#include <cstdint>
#include <string>

namespace snug {

// Free bytes on the filesystem holding `dir` (an existing directory), or the override above.
// Throws snug::Error naming the directory when statvfs fails or the override is not a number.
int64_t free_disk_bytes(const std::string& dir);

// Throws snug::Error "<what>: not saved: it needs N bytes (X GiB) on <dir>, which has M bytes
// (Y GiB) free" when needed > free_disk_bytes(dir).
void check_disk_space(const std::string& dir, int64_t needed, const std::string& what);

}  // namespace snug

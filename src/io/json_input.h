// JSON that a user hands snug (a safetensors header, a config.json, a trainer_state.json) is
// untrusted: parse_json_input() parses it without recursing on nesting (nlohmann's parser is
// iterative; deeper than max_depth is refused before a recursive dump() or a deep DOM can hurt)
// and refuses duplicate object keys, which nlohmann would silently resolve to the last one.
// Every problem is a snug::Error starting with `what` (the file and the part of it).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace snug {

inline constexpr int kMaxJsonDepth = 64;

nlohmann::json parse_json_input(std::string_view text, const std::string& what,
                                int max_depth = kMaxJsonDepth);

// The whole of the regular file `path` (at most max_bytes), read once (a snapshot: a file that
// changes or shrinks afterwards cannot hurt, unlike a memory map that raises SIGBUS). A
// directory, FIFO or device is refused rather than read (a FIFO would block). Errors start with
// `what` (e.g. "dataset 'x.tok'").
std::string read_input_file(const std::string& path, const std::string& what,
                            int64_t max_bytes = int64_t{1} << 40);

}  // namespace snug

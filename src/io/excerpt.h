// Bounded quotes of input in messages (issue 29, item 6): a message names what and where, and
// quotes at most a short excerpt of the input, so that a megabyte key, value or line gives a
// line of message, not a megabyte.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace snug {

// `s` itself when it has at most `max` bytes, else its first `max` bytes (cut on a UTF-8
// character boundary) and "... (N bytes)".
std::string excerpt(std::string_view s, size_t max = 64);
// `s` itself when it has at most `max` bytes, else "... (N bytes) " and its last `max` bytes.
std::string excerpt_tail(std::string_view s, size_t max = 64);

}  // namespace snug

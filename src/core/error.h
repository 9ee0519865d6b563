// Errors on two tiers (see docs/design.md, "Failure is a report"):
//  - snug::Error: what a user or the environment can cause (bad flag, corrupt file, wrong shape,
//    budget exceeded). The message names what and where; the CLI prints it and exits non-zero.
//  - SNUG_ASSERT: internal invariants; a failure is a bug in snug, reported with file:line.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace snug {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown by a MemoryPool whose capacity a request would exceed.
class OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_assert(const char* cond, const char* file, int line,
                               const std::string& msg);
}  // namespace detail

}  // namespace snug

// User-facing check: throws snug::Error with the streamed message.
#define SNUG_CHECK(cond, ...)                                              \
  do {                                                                     \
    if (!(cond)) throw ::snug::Error(::snug::detail::concat(__VA_ARGS__)); \
  } while (0)

// Internal invariant: a failure is a bug.
#define SNUG_ASSERT(cond, ...)                                                             \
  do {                                                                                     \
    if (!(cond))                                                                           \
      ::snug::detail::throw_assert(#cond, __FILE__, __LINE__,                              \
                                   ::snug::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)

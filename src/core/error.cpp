#include "core/error.h"

namespace snug::detail {

void throw_assert(const char* cond, const char* file, int line, const std::string& msg) {
  throw Error(concat("internal error (a bug in snug): ", cond, " failed at ", file, ":", line,
                     msg.empty() ? "" : ": ", msg));
}

}  // namespace snug::detail

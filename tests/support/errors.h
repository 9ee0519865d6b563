// The message of a snug::Error, for tests that check what a refusal says.
#pragma once

#include <functional>
#include <string>

#include "core/error.h"

namespace snug::test {

// What f() throws as a snug::Error, or "" when it throws nothing.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace snug::test

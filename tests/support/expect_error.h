// Helpers for checking snug::Error messages without gmock (the test binary links only gtest).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "core/error.h"

namespace snug::testing_data {

// The message of the snug::Error that f() throws; fails the test if it throws nothing.
template <typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a snug::Error, none was thrown";
  return "";
}

inline ::testing::AssertionResult HasSubstr(const std::string& text, std::string_view part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

}  // namespace snug::testing_data

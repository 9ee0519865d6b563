// Checks for messages that quote hostile input (issue 29, item 6): a refusal of a megabyte value
// quotes a short excerpt of it, and still names the field and the file.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

namespace snug::test {

// Under this many bytes: a few paths, names and an excerpt of 64 bytes, never the value itself.
inline constexpr size_t kBoundedMessageBytes = 400;

// A megabyte of one byte: the size of value the probe fed.
inline std::string megabyte(char c = 'x') {
  return std::string(size_t{1} << 20, c);
}

// `message` is shorter than kBoundedMessageBytes and contains each of `parts`. For EXPECT_TRUE.
::testing::AssertionResult bounded_naming(const std::string& message,
                                          std::initializer_list<std::string_view> parts);

// The message of the snug::Error that f() throws checked as bounded_naming; fails when f()
// throws nothing.
::testing::AssertionResult refuses_bounded(const std::function<void()>& f,
                                           std::initializer_list<std::string_view> parts);

}  // namespace snug::test

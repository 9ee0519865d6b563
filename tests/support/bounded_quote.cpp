#include "support/bounded_quote.h"

#include "core/error.h"

namespace snug::test {

::testing::AssertionResult bounded_naming(const std::string& message,
                                          std::initializer_list<std::string_view> parts) {
  const std::string shown = message.substr(0, 600);
  if (message.size() >= kBoundedMessageBytes)
    return ::testing::AssertionFailure() << message.size() << " bytes (at most "
                                         << kBoundedMessageBytes << "): " << shown << "...";
  for (std::string_view p : parts)
    if (message.find(p) == std::string::npos)
      return ::testing::AssertionFailure() << "'" << shown << "' does not name '" << p << "'";
  return ::testing::AssertionSuccess() << message;
}

::testing::AssertionResult refuses_bounded(const std::function<void()>& f,
                                           std::initializer_list<std::string_view> parts) {
  try {
    f();
  } catch (const Error& e) {
    return bounded_naming(e.what(), parts);
  }
  return ::testing::AssertionFailure() << "no snug::Error was thrown";
}

}  // namespace snug::test

// dist/wait_deadline.h: a collective's --ddp-timeout counts the time its process ran, so that a
// rank stopped inside a wait and continued does not blame the ranks that waited for it.
#include "dist/wait_deadline.h"

#include <gtest/gtest.h>

#include <chrono>

namespace snug::dist {
namespace {
namespace wait_deadline_test {

using Clock = WaitDeadline::Clock;
using std::chrono::milliseconds;

TEST(WaitDeadline, ExpiresAfterTheTimeoutWhilePolling) {
  const Clock::time_point t0{};
  WaitDeadline d(t0, 2.0);
  Clock::time_point t = t0;
  for (int i = 0; i < 1999; ++i) {  // polls 1 ms apart up to 1.999 s
    t += milliseconds(1);
    ASSERT_FALSE(d.expired(t)) << i;
  }
  EXPECT_TRUE(d.expired(t + milliseconds(1)));  // 2 s run
}

TEST(WaitDeadline, TimeStoppedBetweenTwoPollsIsNotCounted) {
  // Stopped for 60 s after 1.5 s of a 2 s timeout, continued: 0.5 s of running left.
  const Clock::time_point t0{};
  WaitDeadline d(t0, 2.0);
  for (int ms = 100; ms <= 1500; ms += 100) ASSERT_FALSE(d.expired(t0 + milliseconds(ms)));
  const Clock::time_point resumed = t0 + milliseconds(61500);
  EXPECT_FALSE(d.expired(resumed));
  EXPECT_FALSE(d.expired(resumed + milliseconds(499)));
  EXPECT_TRUE(d.expired(resumed + milliseconds(500)));
}

TEST(WaitDeadline, AGapUpToOneSecondCounts) {
  // A poll 1 s late (a busy host) is still time waited.
  const Clock::time_point t0{};
  WaitDeadline d(t0, 2.0);
  ASSERT_FALSE(d.expired(t0 + std::chrono::seconds(1)));
  EXPECT_TRUE(d.expired(t0 + std::chrono::seconds(2)));
}

TEST(WaitDeadline, AnEndlessTimeoutNeverExpires) {
  const Clock::time_point t0{};
  WaitDeadline d(t0, 1e300);
  EXPECT_FALSE(d.expired(t0 + std::chrono::hours(24 * 365 * 30)));
}

}  // namespace wait_deadline_test
}  // namespace
}  // namespace snug::dist

// The --ddp-timeout bound of one collective's wait (dist/mpi/collectives.cpp), counting only the
// time this process ran. A gap between two polls far longer than the waiting loop ever sleeps is
// time the process did not run: it was stopped (SIGSTOP, a debugger) or its machine paused. Not
// counting it matters when the stopped rank is continued: mpirun, ending the job after another
// rank timed out waiting for it, sends SIGCONT before SIGTERM, and a stopped rank that counted
// the time it spent stopped would find its own deadline past and blame the ranks that waited for
// it ("rank 0 did not arrive"), beside the true message naming it. Seen in
// tests/dist/failure_check.cpp's stop_rank1 in two runs of three before this.
#pragma once

#include <algorithm>
#include <chrono>

namespace snug::dist {

class WaitDeadline {
 public:
  using Clock = std::chrono::steady_clock;
  // A poll gap longer than this is time not run (the loop naps 0.2 ms at most; a scheduler on an
  // oversubscribed host deschedules for milliseconds).
  static constexpr Clock::duration kNotRunning = std::chrono::seconds(1);

  // timeout_s is capped at 10^9 s (31 years), so that the nanosecond clock cannot overflow.
  WaitDeadline(Clock::time_point start, double timeout_s)
      : last_(start),
        deadline_(start + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(std::min(timeout_s, 1e9)))) {}

  // Polled at `now` (non-decreasing): true once the time run since the start reaches the timeout.
  bool expired(Clock::time_point now) {
    const Clock::duration gap = now - last_;
    if (gap > kNotRunning) deadline_ += gap;
    last_ = now;
    return now >= deadline_;
  }

 private:
  Clock::time_point last_, deadline_;
};

}  // namespace snug::dist

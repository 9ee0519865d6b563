// Start-up progress: initializing (and quantizing) a many-billion-parameter model takes long
// enough (minutes on a 2-core host) to need a sign of life. While an InitProgress is alive,
// nn::fill_values_indexed reports every filled parameter's elements, and the progress is drawn on
// `out` (stderr in `snug train`): redrawn in place on a terminal (at most 5 times a second), else
// one line at most every 2 seconds, and at the end:
//   initializing 6.74B parameters: 37% (2.49B) 12.3 s
// One at a time (a second concurrent one is refused); reports arrive from the thread that
// fills, not from OpenMP workers.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace snug::nn {

class InitProgress {
 public:
  // total: the elements to be filled; what: the verb ("initializing", "quantizing").
  InitProgress(FILE* out, int64_t total, std::string what);
  ~InitProgress();
  InitProgress(const InitProgress&) = delete;
  InitProgress& operator=(const InitProgress&) = delete;
  void add(int64_t n);
  int64_t done() const { return done_; }

 private:
  void draw(bool last);
  FILE* out_;
  int64_t total_;
  std::string what_;
  int64_t done_ = 0;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

// Reports n filled elements to the live InitProgress, if any.
void init_progress_add(int64_t n);

}  // namespace snug::nn

#include "nn/init_progress.h"

#include <unistd.h>

#include <utility>

#include "core/error.h"

namespace snug::nn {

namespace {
InitProgress* g_live = nullptr;

std::string billions(int64_t n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fB", static_cast<double>(n) / 1e9);
  return buf;
}
}  // namespace

InitProgress::InitProgress(FILE* out, int64_t total, std::string what)
    : out_(out),
      total_(total),
      what_(std::move(what)),
      tty_(out != nullptr && ::isatty(::fileno(out)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {
  SNUG_CHECK(g_live == nullptr, "InitProgress: one is already running");
  g_live = this;
}

InitProgress::~InitProgress() {
  g_live = nullptr;
  if (!finished_ && done_ > 0) draw(true);
}

void InitProgress::add(int64_t n) {
  done_ += n;
  const auto now = std::chrono::steady_clock::now();
  const bool last = done_ >= total_;
  if (last) {
    if (!finished_) draw(true);
    finished_ = true;
    return;
  }
  const std::chrono::milliseconds gap(tty_ ? 200 : 2000);
  if (now - last_ >= gap) {
    last_ = now;
    draw(false);
  }
}

void InitProgress::draw(bool last) {
  if (out_ == nullptr) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const int pct =
      total_ > 0
          ? static_cast<int>(100.0 * static_cast<double>(done_) / static_cast<double>(total_))
          : 100;
  std::fprintf(out_, "%s%s %s parameters: %d%% (%s) %.1f s%s", tty_ ? "\r" : "", what_.c_str(),
               billions(total_).c_str(), pct, billions(done_).c_str(), s,
               tty_ && !last ? "" : "\n");
  std::fflush(out_);
}

void init_progress_add(int64_t n) {
  if (g_live != nullptr) g_live->add(n);
}

}  // namespace snug::nn

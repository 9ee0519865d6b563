#include "cli/progress.h"

#include <unistd.h>

#include <string>

namespace snug {

ConsoleProgress::ConsoleProgress(FILE* out, int64_t log_every, bool show_loss)
    : out_(out), log_every_(log_every), show_loss_(show_loss), tty_(isatty(fileno(out)) != 0) {}

void ConsoleProgress::on_step(const StepLog& l) {
  const double rate = l.elapsed_s > 0 ? static_cast<double>(l.step) / l.elapsed_s : 0.0;
  const double eta = rate > 0 ? static_cast<double>(l.total - l.step) / rate : 0.0;
  if (tty_) {
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * l.step / (l.total > 0 ? l.total : 1));
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kWidth - filled), ' ');
    std::fprintf(out_, "\r%3d%%|%s| %lld/%lld [%.0fs<%.0fs, %.2f it/s]",
                 static_cast<int>(100 * l.step / (l.total > 0 ? l.total : 1)), bar.c_str(),
                 static_cast<long long>(l.step), static_cast<long long>(l.total), l.elapsed_s, eta,
                 rate);
    if (show_loss_) std::fprintf(out_, " loss %.4f lr %.2e", l.loss, l.learning_rate);
    std::fflush(out_);
    drawn_ = true;
  }
  if (l.step % log_every_ == 0 || l.step == l.total || l.step == 1) {
    if (tty_) {
      if (l.step != l.total) return;  // the bar already shows it
      finish();
    }
    if (show_loss_)
      std::fprintf(out_, "step %lld/%lld  loss %.4f  grad_norm %.4f  learning_rate %.3e  %.1fs\n",
                   static_cast<long long>(l.step), static_cast<long long>(l.total), l.loss,
                   l.grad_norm, l.learning_rate, l.elapsed_s);
    else
      std::fprintf(out_, "step %lld/%lld  %.1fs\n", static_cast<long long>(l.step),
                   static_cast<long long>(l.total), l.elapsed_s);
    std::fflush(out_);
  }
}

void ConsoleProgress::on_eval(const EvalLog& l) {
  finish();
  std::fprintf(out_, "eval step %lld  eval_loss %.4f  perplexity %.4g",
               static_cast<long long>(l.step), l.eval_loss, l.perplexity);
  if (l.accuracy) std::fprintf(out_, "  eval_accuracy %.4f", *l.accuracy);
  std::fprintf(out_, "  (%lld samples)\n", static_cast<long long>(l.samples));
  std::fflush(out_);
}

void ConsoleProgress::finish() {
  if (tty_ && drawn_) {
    std::fputc('\n', out_);
    drawn_ = false;
  }
}

}  // namespace snug

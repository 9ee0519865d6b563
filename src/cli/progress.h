// Console progress for `snug train`: a redrawn bar on a terminal (like tqdm in the Trainer),
// one plain line every --log-every steps otherwise (logs, CI, pipes).
#pragma once

#include <cstdio>

#include "train/trainer.h"

namespace snug {

class ConsoleProgress final : public TrainCallback {
 public:
  ConsoleProgress(FILE* out, int64_t log_every, bool show_loss);
  void on_step(const StepLog& log) override;
  // "eval step 20  eval_loss 2.3456  perplexity 10.44  (64 samples)", with
  // "  eval_accuracy 0.5000" before the samples for sequence classification
  void on_eval(const EvalLog& log) override;
  void finish();  // ends the bar's line

 private:
  FILE* out_;
  int64_t log_every_;
  bool show_loss_;
  bool tty_;
  bool drawn_ = false;
};

}  // namespace snug

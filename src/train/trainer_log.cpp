// Trainer: the steps of an optimizer step that report and keep (train/trainer.h lists them in
// order): the log, evaluation, and checkpoints.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "data/collator.h"
#include "train/checkpoint.h"
#include "train/output_dir.h"
#include "train/train_window.h"
#include "train/trainer.h"
#include "train/zero_checkpoint.h"

namespace snug {

EvalOptions Trainer::eval_options() const {
  EvalOptions o;
  o.skip_repeated_shapes = skip_repeats_;
  // Data parallelism: the ranks share the batches and sum their figures (train/evaluate.h).
  if (world() > 1) o.comm = comm_;
  // Stage 3: each forward gathers its blocks from every rank, so every rank runs as many.
  o.same_forwards = zero3_ != nullptr;
  // The evaluation's masks and labels (data/collator.h) are the same at every evaluation of a
  // run, so that its eval_loss moves with the model only.
  const uint64_t seed = args_.seed;
  if (task_ == ModelTask::masked_lm) {
    const int64_t vocab = vocab_;
    const auto mask_id = static_cast<int32_t>(mask_token_id_);
    o.prepare = [seed, vocab, mask_id](int32_t* inputs, int32_t* targets, int64_t rows,
                                       int64_t cols, int64_t first_row) {
      mask_tokens(inputs, targets, rows * cols, vocab, mask_id, eval_collator_key(seed, first_row));
    };
  } else if (task_ == ModelTask::sequence_classification) {
    // The evaluation data is a token stream read in order (the constructor checks): row i is
    // its window i.
    const int64_t num_labels = num_labels_;
    o.prepare = [seed, num_labels](int32_t*, int32_t* targets, int64_t rows, int64_t cols,
                                   int64_t first_row) {
      std::vector<int32_t> labels(static_cast<size_t>(rows));
      for (int64_t b = 0; b < rows; ++b)
        labels[static_cast<size_t>(b)] = dummy_eval_label(seed, first_row + b, num_labels);
      row_labels(targets, labels.data(), rows, cols);
    };
    o.accuracy = true;
  }
  return o;
}

void Trainer::run_eval(TrainResult& r, TrainCallback* callback) {
  model_.device().pool().set_phase(detail::concat("eval step ", r.steps));
  // Every evaluation starts from the same memory (weights, optimizer state, no gradients) and
  // has the same shapes: in a dry run the first allocates all that the others would.
  // Stage 3: each forward gathers its blocks as in training (EvalOptions::same_forwards pairs
  // up the ranks' gathers), so the model is never whole.
  EvalLog e = skip_repeats_ && model_.device().is_meta() && !r.evals.empty()
                  ? r.evals.front()
                  : evaluate(model_, *eval_, args_.per_device_eval_batch_size, args_.seq_len,
                             args_.seed, eval_options());
  e.step = r.steps;
  SNUG_CHECK(std::isfinite(e.eval_loss), "eval_loss is ", e.eval_loss, " at step ", r.steps);
  r.evals.push_back(e);
  if (callback) callback->on_eval(e);
}

void Trainer::log_step(TrainResult& r, const TrainWindow& w, const StepOutcome& s, double lr,
                       double elapsed_s, TrainCallback* callback) const {
  ++r.steps;
  r.skipped_steps += s.skipped ? 1 : 0;
  r.samples += w.B * w.accum;
  for (const int64_t c : w.cols) {
    r.tokens += w.B * c;
    r.longest_batch = std::max(r.longest_batch, c);
  }
  r.loss.push_back(s.loss);
  r.grad_norm.push_back(s.grad_norm);
  r.learning_rate.push_back(lr);
  if (callback) callback->on_step({r.steps, total_steps_, s.loss, s.grad_norm, lr, elapsed_s});
}

void Trainer::save(TrainResult& r, const TrainWindow& w) {
  CheckpointState st;
  st.step = r.steps;
  st.data_epoch = w.epoch;
  st.data_position = w.position;
  st.seed = args_.seed;
  st.config = args_.to_json();
  // The ranks that wrote it, when more than one (a resume says when it changes).
  if (world() > 1) st.config["world_size"] = world();
  st.run = run_record_;
  // Data parallelism: every rank holds the same weights (and at stage 0 the same optimizer
  // state), so rank 0 writes the checkpoint and the others wait for it at the barrier below: no
  // rank goes on past a checkpoint that is not complete.
  // ZeRO stages 1-2: every rank writes its optimizer shard into the folder rank 0 is writing
  // (train/zero_checkpoint.h), between two barriers: rank 0 made the folder before the first and
  // records the shards' checksums after the second.
  const std::string folder =
      (std::filesystem::path(args_.output_dir) / ("checkpoint-" + std::to_string(st.step)))
          .string();
  OptimizerStateFiles opt_files;
  if (zero_ != nullptr && rank() == 0)
    opt_files.save = [this](const std::string& tmp) {
      comm_->barrier();
      write_zero_shard(tmp, *zero_, 0, world());
      comm_->barrier();
      return write_zero_index(tmp, *zero_, world());
    };
  // Stage 3: rank 0 writes the model consolidated, each parameter gathered (a collective) while
  // it is written; every other rank takes part in the same gathers.
  if (rank() == 0) {
    r.checkpoints.push_back(save_checkpoint(args_.output_dir, st, model_, *optimizer_,
                                            checkpoint_files_, opt_files, zero3_.get()));
  } else {
    if (zero3_) follow_checkpoint_gathers(model_, *zero3_);
    if (zero_ != nullptr) {
      comm_->barrier();
      write_zero_shard(folder + ".tmp", *zero_, rank(), world());
      comm_->barrier();
    }
    r.checkpoints.push_back(folder);
  }
  // --load-best-model-at-end: the Trainer judges a checkpoint by the evaluation of its step
  // (save steps are multiples of eval steps): lower eval_loss, higher eval_accuracy is better
  // (greater_is_better), and a tie keeps the earlier checkpoint.
  if (args_.load_best_model_at_end && !r.evals.empty() && r.evals.back().step == r.steps) {
    const EvalLog& e = r.evals.back();
    const bool accuracy = args_.best_metric_key() == "eval_accuracy";
    SNUG_ASSERT(!accuracy || e.accuracy.has_value(), "no eval_accuracy at step ", r.steps);
    const double metric = accuracy ? *e.accuracy : e.eval_loss;
    const bool better = args_.greater_is_better() ? metric > r.best_metric : metric < r.best_metric;
    if (r.best_model_checkpoint.empty() || better) {
      r.best_model_checkpoint = r.checkpoints.back();
      r.best_metric = metric;
    }
  }
  if (rank() == 0)
    rotate_checkpoints(args_.output_dir, args_.save_total_limit, r.checkpoints.back(),
                       r.best_model_checkpoint);
  if (world() > 1) comm_->barrier();
}

void Trainer::finish(TrainResult& r, TrainCallback* callback) {
  if (eval_ != nullptr && (r.evals.empty() || r.evals.back().step != r.steps))
    run_eval(r, callback);
  if (args_.load_best_model_at_end && !r.best_model_checkpoint.empty() &&
      r.best_model_checkpoint != r.checkpoints.back()) {
    model_.device().pool().set_phase("load best model");
    load_checkpoint(r.best_model_checkpoint, model_, *optimizer_);
  }
}

}  // namespace snug

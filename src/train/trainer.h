// The training loop: the Hugging Face Trainer's inner loop for a causal LM, without the
// framework around it. Per optimizer step: gradient_accumulation_steps micro-batches of
// forward + backward(1/accum), global-norm gradient clipping (torch.nn.utils.clip_grad_norm_),
// optimizer step at the scheduled learning rate, zero_grad(set_to_none). Pool phase labels
// ("forward h.2", "backward lm_head", "step 3 optimizer") say where the peak happened.
//
// train() runs each optimizer step as named steps, in this order, so that a data-parallel
// communicator (issue 30) slots in between them:
//   read window   the window's micro-batches from the loader (train/train_window.h), and their
//                 count of valid targets, which synchronise_targets() makes the global one;
//   accumulate    forward + backward over the micro-batches (train/accumulate.h), or the fused
//                 step of an optimizer that runs inside backward (train/fused_step.h);
//   synchronise   the gradients made the same on every rank (all-reduce, or reduce-scatter to
//                 their owners); nothing in one process;
//   step          fp16's unscale and overflow check, clipping by the global norm (its sum of
//                 squares local, then summed across ranks, then the root: train/grad_norm.h),
//                 the optimizer's update, zero_grad;
//   log, eval     the step's record and callback; evaluation every --eval-steps;
//   save          a checkpoint every --save-steps (with --load-best-model-at-end's bookkeeping).
//
// Failures during the run (non-finite loss, out of device memory, bad data) do not throw out of
// train(): they end the run and come back in TrainResult::error, with everything measured up to
// that point, so the caller can still write the report.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batches.h"
#include "data/dataset.h"
#include "dist/communicator.h"
#include "models/model.h"
#include "optim/lomo.h"
#include "optim/optimizer.h"
#include "train/accumulate.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"
#include "train/grad_scaler.h"
#include "train/grad_sync.h"
#include "train/output_dir_lock.h"
#include "train/training_args.h"
#include "train/zero_optimizer.h"

namespace snug {

class DataLoader;
struct TrainWindow;

struct StepLog {
  int64_t step;  // 1-based, completed optimizer steps
  int64_t total;
  double loss;  // mean over all target tokens of the step's micro-batches (0 on meta)
  double grad_norm;
  double learning_rate;
  double elapsed_s;
};

class TrainCallback {
 public:
  virtual ~TrainCallback() = default;
  virtual void on_step(const StepLog& log) = 0;
  virtual void on_eval(const EvalLog& /*log*/) {}
};

struct TrainResult {
  int64_t steps = 0;        // completed optimizer steps
  int64_t total_steps = 0;  // planned
  int64_t samples = 0;      // sequences consumed by completed steps
  int64_t tokens = 0;
  int64_t longest_batch = 0;  // the most columns (tokens per row) of any micro-batch
  double runtime_s = 0;
  std::vector<double> loss, grad_norm, learning_rate;  // per completed step
  std::string error;                                   // empty when the run finished
  bool out_of_memory = false;
  int64_t resumed_from_step = 0;         // > 0 when resumed: steps counts it, the vectors do not
  std::vector<std::string> checkpoints;  // folders saved during the run
  // --fp16: optimizer steps skipped for inf/NaN gradients, and the loss scale at the end.
  int64_t skipped_steps = 0;
  double loss_scale = 0.0;  // 0 without a loss scaler
  // Evaluations in order (--eval-data/--eval-split); with --load-best-model-at-end, the best
  // checkpoint ("" when none was saved) and its --metric-for-best-model value, loaded at the
  // end.
  std::vector<EvalLog> evals;
  std::string best_model_checkpoint;
  double best_metric = 0.0;
  // Data parallelism: seconds spent in the gradient all-reduce and its bucket copies (0 in a
  // world of one), and the number of ranks.
  double communication_s = 0.0;
  int world_size = 1;
};

class Trainer {
 public:
  // `data` may be null on the meta device only (a dry run without data: full rows, nothing
  // read).
  Trainer(const TrainingArguments& args, Model& model, const TokenSource* data);
  // Any data (data/batches.h: token streams or jsonl examples), and optionally evaluation data
  // (evaluated every --eval-steps and at the end). Packed data needs a model that takes
  // position ids. On meta the data is read and evaluated as on a real device (shapes only), so
  // that a dry run sees the run's batches (plan/dry_run.h).
  //
  // `comm`: the ranks of a data-parallel run (ZeRO stage 0 = DDP; docs/distributed.md), kept by
  // the caller; null is the world of one (every byte as without it). With N ranks each reads its
  // B rows of every global batch of N*B (data/batches.h's DataShard), the window's target count
  // and the gradients are summed across ranks, so that each rank steps as one process with batch
  // N*B would; only rank 0 writes checkpoints (the others wait for it at a barrier), but at
  // --zero-stage 1-3 every rank writes its optimizer shard into it (train/zero_checkpoint.h); at
  // stage 3 every rank takes part in gathering the whole model for rank 0 to write.
  Trainer(const TrainingArguments& args, Model& model, const TrainData* data, const TrainData* eval,
          dist::Communicator* comm = nullptr);
  int64_t total_steps() const { return total_steps_; }
  // The step training starts from (the checkpoint's with --resume-from, else 0).
  int64_t start_step() const { return start_step_; }
  // With --resume-from: the settings that differ from the checkpoint's run and are accepted
  // ("learning_rate 0.0006 -> 0.001"; train/run_record.h).
  const std::vector<std::string>& resume_changes() const { return resume_changes_; }
  // Why a real run of these arguments would be refused before step 1 for a feature not built
  // yet ("" when it would run): such a run is refused on a real device, and replayed on meta, so
  // that a plan gives its bytes and says it is a plan only.
  const std::string& unbuilt() const { return unbuilt_; }
  // Checkpoint folders of an earlier run that --overwrite-output-dir removed before step 1.
  const std::vector<std::string>& removed_checkpoints() const { return removed_checkpoints_; }
  // --fp16's loss scaler, for callers that need other than GradScaler's defaults (tests).
  void set_grad_scaler_options(const GradScalerOptions& o);
  // Dry runs (plan/dry_run.h), on meta only: skip the steps, evaluations and evaluation batches
  // whose shapes occurred before from the same memory (train/replay_memo.h), so that a long run
  // replays in milliseconds. The peak stays exact; alloc_count counts what ran. Off by default:
  // `train --device meta` allocates what a cpu run does, one for one.
  void set_skip_repeated_shapes(bool on) { skip_repeats_ = on; }
  TrainResult train(TrainCallback* callback = nullptr);
  // At --zero-stage 3 the model keeps its parameters partitioned after the Trainer is gone (each
  // rank its slices, Parameter::shard, which hold the shards' memory until the model goes): the
  // Trainer no longer gathers them.
  ~Trainer();

 private:
  Trainer(const TrainingArguments& args, Model& model, std::unique_ptr<TrainData> owned,
          const TrainData* data, const TrainData* eval, dist::Communicator* comm);
  // The rank's share of every batch.
  DataShard shard() const;
  int world() const { return comm_->size(); }
  // ZeRO stages 2-3: gradients reduced on every micro-batch into the rank's slice.
  bool sharded_gradients() const { return args_.zero_stage >= 2; }  // known before zero_ is made
  // Gradients go through buckets (data parallelism, or stage 2's slice even on one rank).
  bool bucketed() const { return world() > 1 || sharded_gradients(); }
  int rank() const { return comm_->rank(); }
  // What one optimizer step gives the log (0 for a step a dry run skips).
  struct StepOutcome {
    double loss = 0.0, grad_norm = 0.0;
    bool skipped = false;  // fp16: an overflow skipped the update
  };
  // The steps of one optimizer step, in train()'s order (see the top of this file). A dry run
  // skips run_step for steps whose shapes repeat (train/replay_memo.h).
  void read_window(TrainWindow& w, int64_t step) const;
  void synchronise_targets(TrainWindow& w) const;
  StepOutcome run_step(const TrainWindow& w, int64_t step, double lr);
  double accumulate(const TrainWindow& w);
  StepOutcome fused_step(const TrainWindow& w, double lr);
  void synchronise_gradients();
  void dump_gradients() const;  // SNUG_DUMP_FIRST_GRADIENTS (trainer_step.cpp), for tests
  double clip_gradients();      // returns the pre-clip global norm
  // The gradients the step reads: the model's, or at stage 2 the rank's slice's pieces.
  const ParameterList& step_gradients() const;
  void log_step(TrainResult& r, const TrainWindow& w, const StepOutcome& s, double lr,
                double elapsed_s, TrainCallback* callback) const;
  void save(TrainResult& r, const TrainWindow& w);
  // After the last step: the final evaluation, --load-best-model-at-end's load.
  void finish(TrainResult& r, TrainCallback* callback);
  // --resume-from: checks the checkpoint's run record against this run's, loads it and sets the
  // start step and loader state.
  void resume(const std::string& from);

  // Evaluates, logs and keeps the result in r (and tracks the best with
  // --load-best-model-at-end).
  void run_eval(TrainResult& r, TrainCallback* callback);
  // How the task's evaluation batches are made and scored (EvalOptions).
  EvalOptions eval_options() const;
  // The task's batch (B, T) at inputs/targets: the masked-LM collator or the row labels on the
  // loader's window (data/collator.h); nothing for causal-lm.
  void prepare_batch(int32_t* inputs, int32_t* targets, int64_t T, int64_t step, int64_t micro,
                     int64_t epoch, int64_t position, const BatchSource& source) const;

  TrainingArguments args_;
  Model& model_;
  ModelTask task_ = ModelTask::causal_lm;
  int64_t num_labels_ = 0, mask_token_id_ = -1, vocab_ = 0;
  std::unique_ptr<TrainData> owned_data_;  // the TokenSource constructor's wrapper
  const TrainData* data_;
  const TrainData* eval_ = nullptr;
  // --zero-stage 3: the partitioned parameters (train/zero3_params.h), the model's gatherer.
  std::unique_ptr<Zero3Parameters> zero3_;
  std::unique_ptr<Optimizer> optimizer_;
  InBackwardOptimizer* fused_ = nullptr;  // optimizer_ when it runs inside backward (lomo)
  ZeroOptimizer* zero_ = nullptr;         // optimizer_ at --zero-stage 1, 2 or 3
  std::unique_ptr<GradScaler> scaler_;    // --fp16 only
  int64_t total_steps_ = 0;
  int64_t start_step_ = 0;
  int64_t data_epoch_ = 0, data_position_ = 0;  // loader state to seek to before training
  nlohmann::json run_record_;                   // train/run_record.h; recorded in each checkpoint
  CheckpointModelFiles checkpoint_files_;       // config.json etc. of a full fine-tune's ones
  std::vector<std::string> removed_checkpoints_;
  std::unique_ptr<OutputDirLock> output_lock_;  // held while the run may save (output_dir_lock.h)
  std::vector<std::string> resume_changes_;
  std::string unbuilt_;  // unbuilt()
  bool skip_repeats_ = false;
  std::unique_ptr<dist::Communicator> own_comm_;  // the world of one when none was given
  dist::Communicator* comm_ = nullptr;
  double communication_s_ = 0.0;
  // Data parallelism: the window's gradient buckets, fed by a grad-ready listener on the last
  // micro-batch while backward runs (train/grad_sync.h); declared after what they refer to.
  std::unique_ptr<GradientBuckets> buckets_;
  std::unique_ptr<GradReadySubscription> bucket_listener_;
};

}  // namespace snug

#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "core/error.h"
#include "data/collator.h"
#include "data/prefetch.h"
#include "kernels/gemm_path.h"
#include "kernels/op_table.h"
#include "train/checkpoint.h"
#include "train/fused_step.h"
#include "train/grad_norm.h"
#include "train/model_setup.h"
#include "train/output_dir.h"
#include "train/replay_memo.h"
#include "train/run_record.h"
#include "train/schedule.h"

namespace snug {

namespace {

// A TokenSource the caller keeps, as training data.
std::unique_ptr<TrainData> borrow(const TokenSource* s) {
  if (s == nullptr) return nullptr;
  return std::make_unique<TokenStreamData>(
      std::shared_ptr<const TokenSource>(s, [](const TokenSource*) {}));
}

}  // namespace

Trainer::Trainer(const TrainingArguments& args, Model& model, const TokenSource* data)
    : Trainer(args, model, borrow(data), nullptr, nullptr) {}

Trainer::Trainer(const TrainingArguments& args, Model& model, const TrainData* data,
                 const TrainData* eval)
    : Trainer(args, model, nullptr, data, eval) {}

Trainer::Trainer(const TrainingArguments& args, Model& model, std::unique_ptr<TrainData> owned,
                 const TrainData* data, const TrainData* eval)
    : args_(args),
      model_(model),
      owned_data_(std::move(owned)),
      data_(owned_data_ ? owned_data_.get() : data),
      eval_(eval) {
  args_.validate();
  for (const TrainData* d : {data_, eval_})
    if (d != nullptr && d->packed()) {
      const std::string why = model_.position_ids_unsupported();
      SNUG_CHECK(why.empty(), "--packing: ", why,
                 ", which cannot keep packed documents apart; train it without --packing");
    }
  {
    const ModelConfig mc = args_.model_config();
    task_ = mc.task;
    num_labels_ = mc.num_labels;
    mask_token_id_ = mc.mask_token_id;
    vocab_ = mc.shape.vocab_size;
    SNUG_CHECK(task_ != ModelTask::sequence_classification || args_.data == "dummy" ||
                   model_.device().is_meta(),
               "--task sequence-classification: labels come with --data dummy only (random "
               "labels, as the seeds' dummy dataset); --data ",
               args_.data, " has no labels");
    SNUG_CHECK(task_ != ModelTask::sequence_classification || args_.eval_data.empty() ||
                   args_.eval_data == "dummy",
               "--task sequence-classification: evaluation labels come with --eval-split of "
               "--data dummy or --eval-data dummy only; --eval-data ",
               args_.eval_data, " has no labels");
    SNUG_CHECK(
        args_.best_metric_key() != "eval_accuracy" || task_ == ModelTask::sequence_classification,
        "--metric-for-best-model ", args_.metric_for_best_model,
        ": accuracy is computed for --task sequence-classification only; ", mc.shape.name,
        " is --task ", task_name(task_), " (use eval_loss)");
  }
  SNUG_CHECK(data_ || model_.device().is_meta(), "Trainer: a dataset is required on ",
             model_.device().name());
  const OptimizerOptions o = args_.optimizer_options();
  configure_model(model_, args_);
  const bool fp16 = args_.compute_dtype() == ComputeDType::f16;
  if (fp16) scaler_ = std::make_unique<GradScaler>();
  // Quantized base, LoRA adapters (freezing the base), --freeze, NEFTune, before the optimizer
  // exists: frozen parameters get no state and no gradient.
  prepare_model(model_, args_);
  optimizer_ = make_optimizer(args_.optim, model_.parameters(), o);
  fused_ = dynamic_cast<InBackwardOptimizer*>(optimizer_.get());
  if (fused_) check_fused_settings(args_.optim, args_.gradient_accumulation_steps);
  if (args_.max_steps > 0) {
    total_steps_ = args_.max_steps;
  } else {
    SNUG_CHECK(data_, "--max-steps is required when no dataset is read (device meta)");
    const auto probe =
        data_->batches(args_.per_device_train_batch_size, args_.seq_len, args_.seed, true);
    const double per_epoch = static_cast<double>(probe->batches_per_epoch()) /
                             static_cast<double>(args_.gradient_accumulation_steps);
    total_steps_ =
        std::max<int64_t>(1, static_cast<int64_t>(std::ceil(per_epoch * args_.num_train_epochs)));
  }
  // A meta-device run (a dry run or a what-if of a resumed run) has no values to restore: it
  // starts at step 0, which allocates the same state a resumed run holds.
  const bool real = !model_.device().is_meta();
  const bool resuming = real && !args_.resume_from.empty();
  if (real && (args_.save_steps > 0 || resuming)) run_record_ = make_run_record(args_);
  if (real && args_.save_steps > 0)
    checkpoint_files_ = checkpoint_model_files(model_, args_.model_config());
  if (resuming) resume(args_.resume_from);
  // Before step 1: no other run is writing into the output dir (train/output_dir_lock.h), and it
  // holds no other run's checkpoints (train/output_dir.h).
  if (real && args_.save_steps > 0)
    output_lock_ = std::make_unique<OutputDirLock>(args_.output_dir);
  if (real && args_.save_steps > 0)
    removed_checkpoints_ =
        prepare_output_dir(args_.output_dir, run_record_, resuming, args_.overwrite_output_dir);
}

void Trainer::resume(const std::string& from) {
  const std::string dir = resolve_checkpoint(from);
  const std::string where = dir + "/trainer_state.json";
  const TrainerState saved = read_trainer_state(dir);
  // A resumed run started where the run it continues started (it cannot take --init-from).
  run_record_["started_from"] = saved.run.value("started_from", nlohmann::json());
  // What would make the saved state wrong is refused, naming the field, before anything is
  // loaded; what the Hugging Face Trainer lets a resume change is accepted and reported
  // (docs/checkpoints.md).
  check_same_run(saved.run, run_record_, where);
  resume_changes_ = config_changes(saved.config, args_.to_json());
  const CheckpointState st = load_checkpoint(dir, model_, *optimizer_);
  SNUG_CHECK(st.step <= total_steps_, dir, ": checkpoint is at step ", st.step,
             ", beyond the run's ", total_steps_, " steps");
  if (data_) {
    const auto probe =
        data_->batches(args_.per_device_train_batch_size, args_.seq_len, args_.seed, true);
    SNUG_CHECK(st.data_position < probe->items_per_epoch(), where, ": data.position ",
               st.data_position, " is beyond an epoch of this data (", probe->items_per_epoch(),
               " rows of at most ", args_.seq_len, " tokens); the checkpoint is damaged");
  }
  start_step_ = st.step;
  data_epoch_ = st.data_epoch;
  data_position_ = st.data_position;
}

void Trainer::set_grad_scaler_options(const GradScalerOptions& o) {
  SNUG_CHECK(scaler_, "set_grad_scaler_options: the run has no loss scaler (needs --fp16)");
  scaler_ = std::make_unique<GradScaler>(o);
}

void Trainer::prepare_batch(int32_t* inputs, int32_t* targets, int64_t T, int64_t step,
                            int64_t micro, int64_t epoch, int64_t position,
                            const BatchSource& source) const {
  const int64_t B = args_.per_device_train_batch_size;
  if (task_ == ModelTask::masked_lm) {
    mask_tokens(inputs, targets, B * T, vocab_, static_cast<int32_t>(mask_token_id_),
                collator_key(args_.seed, step, micro));
  } else if (task_ == ModelTask::sequence_classification) {
    // Labels come with --data dummy only, a token stream: the constructor checks.
    dummy_row_labels(targets, source, args_.seed, epoch, position, B, T, num_labels_);
  }
}

EvalLog evaluate(Model& model, const TrainData& data, int64_t B, int64_t T, uint64_t seed,
                 const EvalOptions& options) {
  const std::unique_ptr<BatchSource> src = data.batches(B, T, seed, false);
  const int64_t items = src->items_per_epoch();
  std::vector<int32_t> in(static_cast<size_t>(B * T)), tg(in.size());
  std::vector<int32_t> pos(src->has_positions() ? in.size() : 0);
  double weighted = 0.0;
  int64_t rows_with_targets = 0, done = 0, correct = 0, labelled = 0;
  std::set<std::pair<int64_t, int64_t>> shapes;
  const bool skip = options.skip_repeated_shapes && model.device().is_meta();
  while (done < items) {
    const int64_t rows = std::min(B, items - done);
    const int64_t cols =
        src->next_rows(rows, in.data(), tg.data(), pos.empty() ? nullptr : pos.data());
    if (options.prepare) options.prepare(in.data(), tg.data(), rows, cols, done);
    if (skip && !shapes.insert({rows, cols}).second) {
      if (std::any_of(tg.begin(), tg.begin() + rows * cols, [](int32_t t) { return t >= 0; }))
        rows_with_targets += rows;
      done += rows;
      continue;
    }
    if (!pos.empty())
      model.set_position_ids({pos.begin(), pos.begin() + static_cast<std::ptrdiff_t>(rows * cols)});
    const float loss = model.forward(in.data(), tg.data(), rows, cols, false);
    if (options.accuracy && !model.device().is_meta()) {  // meta has no logits to read
      // (rows, labels): softmax keeps the order of the logits, so either gives the argmax.
      const Tensor& out = model.logits();
      SNUG_ASSERT(out.shape().size() == 2 && out.shape()[0] == rows && out.dtype() == DType::f32,
                  "accuracy needs (rows, labels) fp32 outputs, got ", shape_str(out.shape()));
      const int64_t labels = out.shape()[1];
      // (rows, labels) floats, read on the host.
      std::vector<float> logits(static_cast<size_t>(rows * labels));
      model.device().download(logits.data(), out.data<float>(), rows * labels);
      const float* p = logits.data();
      for (int64_t b = 0; b < rows; ++b) {
        const int32_t label = tg[static_cast<size_t>(b * cols)];
        if (label < 0) continue;
        const float* row = p + b * labels;
        correct += std::max_element(row, row + labels) - row == label ? 1 : 0;
        ++labelled;
      }
    }
    model.free_activations();
    if (model.last_valid_targets() > 0) {
      weighted += static_cast<double>(loss) * static_cast<double>(rows);
      rows_with_targets += rows;
    }
    done += rows;
  }
  if (!pos.empty()) model.set_position_ids({});
  SNUG_CHECK(rows_with_targets > 0, "evaluation data ", data.describe(),
             " has no token to evaluate");
  EvalLog e{};
  e.eval_loss = weighted / static_cast<double>(rows_with_targets);
  e.perplexity = std::exp(e.eval_loss);
  e.samples = done;
  if (options.accuracy && labelled > 0)
    e.accuracy = static_cast<double>(correct) / static_cast<double>(labelled);
  return e;
}

EvalOptions Trainer::eval_options() const {
  EvalOptions o;
  o.skip_repeated_shapes = skip_repeats_;
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
  EvalLog e = skip_repeats_ && model_.device().is_meta() && !r.evals.empty()
                  ? r.evals.front()
                  : evaluate(model_, *eval_, args_.per_device_eval_batch_size, args_.seq_len,
                             args_.seed, eval_options());
  e.step = r.steps;
  SNUG_CHECK(std::isfinite(e.eval_loss), "eval_loss is ", e.eval_loss, " at step ", r.steps);
  r.evals.push_back(e);
  if (callback) callback->on_eval(e);
}

double Trainer::clip_gradients() {
  if (model_.device().is_meta()) return 0.0;
  const ParameterList& params = model_.parameters();
  const double norm = std::sqrt(grad_sum_squares(params));
  if (args_.max_grad_norm > 0) {
    const double coef = clip_coefficient(norm, args_.max_grad_norm);
    if (coef < 1.0) scale_gradients(params, coef);
  }
  return norm;
}

TrainResult Trainer::train(TrainCallback* callback) {
  using clock = std::chrono::steady_clock;
  const int64_t B = args_.per_device_train_batch_size, T = args_.seq_len;
  const int64_t accum = args_.gradient_accumulation_steps;
  const bool real = !model_.device().is_meta();
  MemoryPool& pool = model_.device().pool();
  TrainResult r;
  r.total_steps = total_steps_;

  std::unique_ptr<BatchSource> loader;
  std::unique_ptr<Prefetcher> prefetch;
  if (data_) {
    loader = data_->batches(B, T, args_.seed, true);
    loader->seek(data_epoch_, data_position_);
    prefetch =
        std::make_unique<Prefetcher>(*loader, args_.dataloader_num_workers, 2, model_.device());
  }
  // A dry run without data reads nothing but holds the staging slots a run's prefetcher would.
  std::unique_ptr<BatchSource> slot_shapes;
  if (!data_ && args_.dataloader_num_workers > 0) {
    slot_shapes = FullRowsData().batches(B, T, args_.seed, true);
    prefetch = std::make_unique<Prefetcher>(*slot_shapes, args_.dataloader_num_workers, 2,
                                            model_.device());
  }
  // Host buffers for one accumulation window of token ids (B*T*accum each); micro-batch m is
  // (B, cols[m]) at offset m*B*T.
  std::vector<int32_t> inputs(static_cast<size_t>(B * T * accum), 0), targets(inputs.size(), 0);
  std::vector<int32_t> positions(loader && loader->has_positions() ? inputs.size() : 0, 0);
  std::vector<int64_t> cols(static_cast<size_t>(accum), T);
  // A dry run given the run's data (plan/dry_run.h) reads and evaluates it as the run does, on
  // meta, so that every micro-batch has the run's shape; without data it assumes full rows.
  const bool eval = eval_ != nullptr;
  if (!loader && task_ == ModelTask::sequence_classification) {
    // A dry run without data: label 0 for every row, in the layout the head takes.
    const std::vector<int32_t> zeros(static_cast<size_t>(B), 0);
    for (int64_t micro = 0; micro < accum; ++micro)
      row_labels(&targets[static_cast<size_t>(micro * B * T)], zeros.data(), B, T);
  }

  // The loader's state after the last batch the loop consumed (the prefetcher reads ahead, so
  // the loader itself may be further): what a checkpoint records.
  int64_t data_epoch = data_epoch_, data_position = data_position_;
  const int64_t windows = loader ? loader->items_per_epoch() : 1;
  r.steps = start_step_;
  r.resumed_from_step = start_step_;

  // A dry run of a run's data replays each of its steps, but those whose shapes repeat.
  ReplayMemo memo(skip_repeats_ && !real && loader != nullptr &&
                  !optimizer_->memory_varies_by_step());
  const auto t0 = clock::now();
  try {
    for (int64_t step = start_step_; step < total_steps_; ++step) {
      const std::string prefix = detail::concat("step ", step + 1, " ");
      // The whole accumulation window is read first so that every micro-batch's loss can be
      // normalized by the window's total number of target tokens (not per micro-batch: the
      // gradient-accumulation bug transformers fixed in 4.46). B=8 x 1 and B=2 x 4 over the same
      // samples then give the same loss and the same update.
      int64_t window_targets = 0;
      if (loader) {
        for (int64_t micro = 0; micro < accum; ++micro) {
          const auto off = static_cast<size_t>(micro * B * T);
          const int64_t c = prefetch->next(&inputs[off], &targets[off],
                                           positions.empty() ? nullptr : &positions[off]);
          cols[static_cast<size_t>(micro)] = c;
          prepare_batch(&inputs[off], &targets[off], c, step, micro, data_epoch, data_position,
                        *loader);
          for (int64_t i = micro * B * T; i < micro * B * T + B * c; ++i)
            window_targets += targets[static_cast<size_t>(i)] >= 0 ? 1 : 0;
          const int64_t consumed = data_position + B;
          data_epoch += consumed / windows;
          data_position = consumed % windows;
        }
      } else {
        window_targets = accum * (task_ == ModelTask::sequence_classification ? B : B * T);
      }
      const double lr = args_.learning_rate * lr_multiplier(args_.lr_scheduler_type, step,
                                                            total_steps_, args_.warmup_steps);
      // A dry run skips a step whose shapes all occurred before (train/replay_memo.h), with the
      // values a meta step has.
      double step_loss = 0.0, norm = 0.0;
      if (!memo.skip_step(cols, step > start_step_)) {
        // Random draws of the forwards (LoRA dropout, NEFTune) keyed by the step, so that a
        // resumed run draws what the uninterrupted one did.
        model_.set_forward_count(static_cast<uint64_t>(step) << 16);
        // lomo/adalomo update inside backward (train/fused_step.h): no gradients are left after.
        FusedStepResult fused;
        if (fused_) {
          if (!positions.empty())
            model_.set_position_ids({positions.begin(), positions.begin() + B * cols[0]});
          fused = fused_optimizer_step(model_, *fused_, inputs.data(), targets.data(), B, cols[0],
                                       static_cast<float>(lr), args_.max_grad_norm,
                                       scaler_ ? scaler_->scale() : 0.0);
          if (!positions.empty()) model_.set_position_ids({});
        }
        step_loss =
            fused_ ? fused.loss
                   : accumulate_gradients(model_, inputs.data(), targets.data(),
                                          positions.empty() ? nullptr : positions.data(), cols, B,
                                          T, window_targets, scaler_ ? scaler_->scale() : 1.0);
        SNUG_CHECK(std::isfinite(step_loss), "loss is ", step_loss, " at step ", step + 1,
                   ": training stopped; lower --learning-rate or check the data");
        pool.set_phase(prefix + "optimizer");
        // fp16: unscale, and skip the step when a gradient overflowed (GradScaler.step/update);
        // lomo/adalomo found the overflow in their first pass and updated nothing.
        const bool skip =
            scaler_ && (fused_ ? fused.overflow : scaler_->unscale_and_check(model_.parameters()));
        if (scaler_) scaler_->update(skip);
        norm = std::numeric_limits<double>::quiet_NaN();
        if (fused_) {
          norm = fused.grad_norm;
        } else if (!skip) {
          norm = clip_gradients();
          SNUG_CHECK(std::isfinite(norm), "gradient norm is ", norm, " at step ", step + 1,
                     ": training stopped");
          optimizer_->step(static_cast<float>(lr));
        }
        r.skipped_steps += skip ? 1 : 0;
        model_.zero_grad();
        pool.set_phase(prefix + "done");
      }
      ++r.steps;
      r.samples += B * accum;
      for (const int64_t c : cols) {
        r.tokens += B * c;
        r.longest_batch = std::max(r.longest_batch, c);
      }
      r.loss.push_back(step_loss);
      r.grad_norm.push_back(norm);
      r.learning_rate.push_back(lr);
      if (callback)
        callback->on_step({r.steps, total_steps_, r.loss.back(), norm, lr,
                           std::chrono::duration<double>(clock::now() - t0).count()});
      if (eval && args_.eval_steps > 0 && r.steps % args_.eval_steps == 0) run_eval(r, callback);
      if (real && args_.save_steps > 0 && r.steps % args_.save_steps == 0) {
        CheckpointState st;
        st.step = r.steps;
        st.data_epoch = data_epoch;
        st.data_position = data_position;
        st.seed = args_.seed;
        st.config = args_.to_json();
        st.run = run_record_;
        r.checkpoints.push_back(
            save_checkpoint(args_.output_dir, st, model_, *optimizer_, checkpoint_files_));
        // --load-best-model-at-end: the Trainer judges a checkpoint by the evaluation of its
        // step (save steps are multiples of eval steps): lower eval_loss, higher eval_accuracy
        // is better (greater_is_better), and a tie keeps the earlier checkpoint.
        if (args_.load_best_model_at_end && !r.evals.empty() && r.evals.back().step == r.steps) {
          const EvalLog& e = r.evals.back();
          const bool accuracy = args_.best_metric_key() == "eval_accuracy";
          SNUG_ASSERT(!accuracy || e.accuracy.has_value(), "no eval_accuracy at step ", r.steps);
          const double metric = accuracy ? *e.accuracy : e.eval_loss;
          const bool better =
              args_.greater_is_better() ? metric > r.best_metric : metric < r.best_metric;
          if (r.best_model_checkpoint.empty() || better) {
            r.best_model_checkpoint = r.checkpoints.back();
            r.best_metric = metric;
          }
        }
        rotate_checkpoints(args_.output_dir, args_.save_total_limit, r.checkpoints.back(),
                           r.best_model_checkpoint);
      }
    }
    if (eval && (r.evals.empty() || r.evals.back().step != r.steps)) run_eval(r, callback);
    if (args_.load_best_model_at_end && !r.best_model_checkpoint.empty() &&
        r.best_model_checkpoint != r.checkpoints.back()) {
      model_.device().pool().set_phase("load best model");
      load_checkpoint(r.best_model_checkpoint, model_, *optimizer_);
    }
  } catch (const OutOfMemoryError& e) {
    r.error = e.what();
    r.out_of_memory = true;
  } catch (const Error& e) {
    r.error = e.what();
  }
  r.runtime_s = std::chrono::duration<double>(clock::now() - t0).count();
  r.loss_scale = scaler_ ? scaler_->scale() : 0.0;
  return r;
}

}  // namespace snug

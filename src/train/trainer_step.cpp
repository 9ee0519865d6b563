// Trainer: the steps of one optimizer step that touch the model (train/trainer.h lists them in
// order): read the window, accumulate, synchronise, and the step itself (unscale, clip, update).

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "data/collator.h"
#include "io/safetensors.h"
#include "train/fused_step.h"
#include "train/grad_norm.h"
#include "train/grad_sync.h"
#include "train/train_window.h"
#include "train/trainer.h"

namespace snug {

void Trainer::prepare_batch(int32_t* inputs, int32_t* targets, int64_t T, int64_t step,
                            int64_t micro, int64_t epoch, int64_t position,
                            const BatchSource& source) const {
  const int64_t B = args_.per_device_train_batch_size;
  // Data parallelism: this rank's rows start at row rank*B of the global batch of world*B rows,
  // so the masks and labels are those one process draws for those rows (token streams: every
  // rank's rows have the same T).
  const int64_t first_row = static_cast<int64_t>(rank()) * B;
  if (task_ == ModelTask::masked_lm) {
    mask_tokens(inputs, targets, B * T, vocab_, static_cast<int32_t>(mask_token_id_),
                collator_key(args_.seed, step, micro), first_row * T);
  } else if (task_ == ModelTask::sequence_classification) {
    // Labels come with --data dummy only, a token stream: the constructor checks.
    dummy_row_labels(targets, source, args_.seed, epoch, position + first_row, B, T, num_labels_);
  }
}

void Trainer::read_window(TrainWindow& w, int64_t step) const {
  if (w.has_data()) {
    w.read([&](int32_t* inputs, int32_t* targets, int64_t cols, int64_t micro, int64_t epoch,
               int64_t position, const BatchSource& source) {
      prepare_batch(inputs, targets, cols, step, micro, epoch, position, source);
    });
  } else {
    // A dry run without data: full rows (sequence classification: one label per row).
    w.valid_targets = w.accum * (task_ == ModelTask::sequence_classification ? w.B : w.B * w.T);
  }
  synchronise_targets(w);
}

void Trainer::synchronise_targets(TrainWindow& w) const {
  // Data parallelism: w.valid_targets becomes the sum over the ranks (one scalar all-reduce), so
  // that each rank's losses are divided by the global window's count (train/train_window.h).
  // One process: it already is.
  if (world() > 1) comm_->all_reduce_sum(&w.valid_targets, 1);
}

Trainer::StepOutcome Trainer::run_step(const TrainWindow& w, int64_t step, double lr) {
  // The host pool, when the device has one apart (--offload-optimizer cpu, accelerators), follows
  // the same phases, so its peak says where it happened too.
  MemoryPool& pool = model_.device().pool();
  MemoryPool* host =
      &model_.device().host() != &model_.device() ? &model_.device().host().pool() : nullptr;
  const auto phase = [&](const std::string& label) {
    pool.set_phase(label);
    if (host) host->set_phase(label);
  };
  const std::string prefix = detail::concat("step ", step + 1, " ");
  // Random draws of the forwards (LoRA dropout, NEFTune) keyed by the step, so that a resumed
  // run draws what the uninterrupted one did.
  model_.set_forward_count(static_cast<uint64_t>(step) << 16);
  StepOutcome s;
  if (fused_) {
    s = fused_step(w, lr);
  } else {
    if (bucketed()) {
      // Stage 2: each reduced sum goes to the rank's gradient slice (only the elements it owns
      // stay), and each full-size gradient is freed once in a bucket (train/zero_optimizer.h).
      GradientSink sink;
      if (sharded_gradients())
        sink = [z = zero_](const Parameter& p, int64_t begin, const float* sum, int64_t count) {
          z->accumulate_owned(p, begin, sum, count);
        };
      buckets_ = std::make_unique<GradientBuckets>(
          model_.parameters(), *comm_, args_.ddp_bucket_cap_mb, model_.device(), std::move(sink));
      if (sharded_gradients()) zero_->begin_window();
    }
    s.loss = accumulate(w);
    // Each rank's loss is its share of the window's (divided by the global count): their sum is
    // the global window loss, the same on every rank.
    if (world() > 1) comm_->all_reduce_sum(&s.loss, 1);
  }
  SNUG_CHECK(std::isfinite(s.loss), "loss is ", s.loss, " at step ", step + 1,
             ": training stopped; lower --learning-rate or check the data");
  phase(prefix + "optimizer");
  if (!fused_) {
    synchronise_gradients();
    if (step == start_step_) dump_gradients();
    // fp16: unscale, and skip the step when a gradient overflowed (GradScaler.step/update).
    // Stage 2: each rank checks its slice, and any rank's overflow skips every rank's step.
    s.skipped = scaler_ && scaler_->unscale_and_check(step_gradients());
    if (scaler_ && sharded_gradients() && world() > 1) {
      int64_t any = s.skipped ? 1 : 0;
      comm_->all_reduce_sum(&any, 1);
      s.skipped = any > 0;
    }
  }
  if (scaler_) scaler_->update(s.skipped);
  if (!fused_) {
    s.grad_norm = std::numeric_limits<double>::quiet_NaN();
    if (!s.skipped) {
      s.grad_norm = clip_gradients();
      SNUG_CHECK(std::isfinite(s.grad_norm), "gradient norm is ", s.grad_norm, " at step ",
                 step + 1, ": training stopped");
      optimizer_->step(static_cast<float>(lr));
    }
  }
  model_.zero_grad();
  if (zero_) {
    zero_->release_gradients();
    communication_s_ += zero_->take_communication_s();
  }
  if (zero3_) communication_s_ += zero3_->take_communication_s();
  phase(prefix + "done");
  return s;
}

double Trainer::accumulate(const TrainWindow& w) {
  // Stage 2 reduces each micro-batch's gradients when its backward ends (DeepSpeed's stage 2
  // does the same): no full-size gradient outlives its backward.
  std::function<void()> after_backward;
  if (sharded_gradients())
    after_backward = [this] {
      const auto t0 = std::chrono::steady_clock::now();
      buckets_->finish();
      communication_s_ +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
  return accumulate_gradients(model_, w.inputs.data(), w.targets.data(),
                              w.has_positions() ? w.positions.data() : nullptr, w.cols, w.B, w.T,
                              w.valid_targets, scaler_ ? scaler_->scale() : 1.0, after_backward);
}

Trainer::StepOutcome Trainer::fused_step(const TrainWindow& w, double lr) {
  // lomo/adalomo update inside backward (train/fused_step.h): no gradients are left after, and
  // an fp16 overflow was found in their first pass, before anything was updated.
  const int64_t cols = w.cols[0];
  if (w.has_positions())
    model_.set_position_ids({w.positions.begin(), w.positions.begin() + w.B * cols});
  const FusedStepResult f = fused_optimizer_step(
      model_, *fused_, w.inputs.data(), w.targets.data(), w.B, cols, static_cast<float>(lr),
      args_.max_grad_norm, scaler_ ? scaler_->scale() : 0.0);
  if (w.has_positions()) model_.set_position_ids({});
  StepOutcome s;
  s.loss = f.loss;
  s.grad_norm = f.grad_norm;
  s.skipped = scaler_ && f.overflow;
  return s;
}

void Trainer::synchronise_gradients() {
  // Data parallelism: every gradient summed across the ranks (all-reduce in buckets started
  // during backward, train/grad_sync.h), before fp16's overflow check and the clipping, which so
  // see the global gradient: the same on every rank, so every rank skips or clips alike (the
  // overflow flag needs no OR of its own, nor the norm a sum of its own). One process: its
  // gradients are the global ones.
  if (!bucketed()) return;
  // The buckets filled while backward ran (their all-reduces started as each filled): the rest,
  // then every sum copied back. Stage 2 finished them after each micro-batch's backward.
  const auto t0 = std::chrono::steady_clock::now();
  if (!sharded_gradients()) buckets_->finish();
  buckets_.reset();
  communication_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Trainer::dump_gradients() const {
  // A test's window onto the first step (tests/dist/stage0_check.cpp compares a data-parallel
  // run's with one process's): SNUG_DUMP_FIRST_GRADIENTS=PATH writes the first step's gradients,
  // synchronised and before unscaling and clipping, from rank 0, to a safetensors file.
  const char* path = std::getenv("SNUG_DUMP_FIRST_GRADIENTS");
  if (path == nullptr || *path == '\0' || model_.device().is_meta()) return;
  if (sharded_gradients()) {
    // Stage 2: no rank holds a whole gradient. Each writes its slice's pieces, as
    // "<param name>@<first element>" (1-D), rank r > 0 to PATH.rank-<r>.
    std::vector<std::pair<std::string, const Tensor*>> pieces;
    for (size_t i = 0; i < zero_->pieces().size(); ++i) {
      const ZeroPiece& pc = zero_->pieces()[i];
      if (pc.source != nullptr)
        pieces.emplace_back(pc.source->name + "@" + std::to_string(pc.begin),
                            &zero_->piece_params()[i]->grad);
    }
    save_safetensors(
        rank() == 0 ? std::string(path) : std::string(path) + ".rank-" + std::to_string(rank()),
        pieces);
    return;
  }
  if (rank() != 0) return;
  std::vector<std::pair<std::string, const Tensor*>> grads;
  for (const Parameter* p : model_.parameters())
    if (p->grad.defined()) grads.emplace_back(p->name, &p->grad);
  save_safetensors(path, grads);
}

const ParameterList& Trainer::step_gradients() const {
  return sharded_gradients() ? zero_->piece_params() : model_.parameters();
}

double Trainer::clip_gradients() {
  if (model_.device().is_meta()) return 0.0;
  const ParameterList& params = step_gradients();
  // Stages 0 and 1: every rank holds the whole summed gradient, so its `sq` is the global one
  // already (a gradient held by several ranks counted once). Stage 2: each rank holds its slice,
  // so the slices' sums of squares are added across the ranks (one double all-reduce).
  double sq = grad_sum_squares(params);
  if (sharded_gradients() && world() > 1) comm_->all_reduce_sum(&sq, 1);
  const double norm = std::sqrt(sq);
  if (args_.max_grad_norm > 0) {
    const double coef = clip_coefficient(norm, args_.max_grad_norm);
    if (coef < 1.0) scale_gradients(params, coef);
  }
  return norm;
}

}  // namespace snug

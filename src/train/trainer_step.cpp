// Trainer: the steps of one optimizer step that touch the model (train/trainer.h lists them in
// order): read the window, accumulate, synchronise, and the step itself (unscale, clip, update).

#include <cmath>
#include <limits>

#include "core/error.h"
#include "data/collator.h"
#include "train/fused_step.h"
#include "train/grad_norm.h"
#include "train/train_window.h"
#include "train/trainer.h"

namespace snug {

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

void Trainer::synchronise_targets(TrainWindow& /*w*/) const {
  // Data parallelism: w.valid_targets becomes the sum over the ranks (one scalar all-reduce), so
  // that each rank's losses are divided by the global window's count (train/train_window.h).
  // One process: it already is.
}

Trainer::StepOutcome Trainer::run_step(const TrainWindow& w, int64_t step, double lr) {
  MemoryPool& pool = model_.device().pool();
  const std::string prefix = detail::concat("step ", step + 1, " ");
  // Random draws of the forwards (LoRA dropout, NEFTune) keyed by the step, so that a resumed
  // run draws what the uninterrupted one did.
  model_.set_forward_count(static_cast<uint64_t>(step) << 16);
  StepOutcome s;
  if (fused_) {
    s = fused_step(w, lr);
  } else {
    s.loss = accumulate(w);
  }
  SNUG_CHECK(std::isfinite(s.loss), "loss is ", s.loss, " at step ", step + 1,
             ": training stopped; lower --learning-rate or check the data");
  pool.set_phase(prefix + "optimizer");
  if (!fused_) {
    synchronise_gradients();
    // fp16: unscale, and skip the step when a gradient overflowed (GradScaler.step/update).
    s.skipped = scaler_ && scaler_->unscale_and_check(model_.parameters());
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
  pool.set_phase(prefix + "done");
  return s;
}

double Trainer::accumulate(const TrainWindow& w) {
  return accumulate_gradients(model_, w.inputs.data(), w.targets.data(),
                              w.has_positions() ? w.positions.data() : nullptr, w.cols, w.B, w.T,
                              w.valid_targets, scaler_ ? scaler_->scale() : 1.0);
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
  // Data parallelism: every gradient summed across the ranks (all-reduce; ZeRO: reduce-scattered
  // to the rank that owns it), before fp16's overflow check and the clipping, which must see the
  // global gradient. One process: its gradients are the global ones.
}

double Trainer::clip_gradients() {
  if (model_.device().is_meta()) return 0.0;
  const ParameterList& params = model_.parameters();
  const double sq = grad_sum_squares(params);
  // Data parallelism: `sq` summed across the ranks here (a gradient held by several ranks
  // counted once), so that every rank clips by the global norm.
  const double norm = std::sqrt(sq);
  if (args_.max_grad_norm > 0) {
    const double coef = clip_coefficient(norm, args_.max_grad_norm);
    if (coef < 1.0) scale_gradients(params, coef);
  }
  return norm;
}

}  // namespace snug

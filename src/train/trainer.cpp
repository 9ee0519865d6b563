#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "data/collator.h"
#include "dist/single_process.h"
#include "train/checkpoint.h"
#include "train/fused_step.h"
#include "train/model_setup.h"
#include "train/offload.h"
#include "train/output_dir.h"
#include "train/replay_memo.h"
#include "train/run_record.h"
#include "train/schedule.h"
#include "train/train_window.h"
#include "train/zero3_init.h"
#include "train/zero_checkpoint.h"

namespace snug {

namespace {

// A TokenSource the caller keeps, as training data.
std::unique_ptr<TrainData> borrow(const TokenSource* s) {
  if (s == nullptr) return nullptr;
  return std::make_unique<TokenStreamData>(
      std::shared_ptr<const TokenSource>(s, [](const TokenSource*) {}));
}

// An integer setting of a checkpoint's config (`fallback` when absent: a checkpoint of one
// process has no world_size).
int64_t saved_setting(const nlohmann::json& config, const char* key, int64_t fallback,
                      const std::string& where) {
  if (!config.contains(key)) return fallback;
  const nlohmann::json& v = config[key];
  SNUG_CHECK(v.is_number_integer() && v.get<int64_t>() >= 1, where, ": config.", key,
             " is not a positive integer");
  return v.get<int64_t>();
}

// Resuming on another number of ranks (docs/distributed.md): accepted, as the Hugging Face
// Trainer accepts it, and said. The step count and the schedule go on; the data goes on at the
// first row no rank has read (a checkpoint's position counts every rank's rows), so with the
// same global batch (ranks x per-device batch x accumulation) the run steps as it would have.
std::vector<std::string> world_changes(const nlohmann::json& saved, int world,
                                       const TrainingArguments& args, const std::string& where) {
  const int64_t was = saved_setting(saved, "world_size", 1, where);
  const int64_t global_was = was * saved_setting(saved, "per_device_train_batch_size", 1, where) *
                             saved_setting(saved, "gradient_accumulation_steps", 1, where);
  const int64_t global_now =
      world * args.per_device_train_batch_size * args.gradient_accumulation_steps;
  std::vector<std::string> out;
  if (was != world) out.push_back(detail::concat("world_size ", was, " -> ", world));
  if (global_was != global_now)
    out.push_back(detail::concat("global batch ", global_was, " -> ", global_now,
                                 " rows per step (ranks x per-device batch x accumulation): the "
                                 "data goes on at the first row not yet read"));
  return out;
}

}  // namespace

Trainer::Trainer(const TrainingArguments& args, Model& model, const TokenSource* data)
    : Trainer(args, model, borrow(data), nullptr, nullptr, nullptr) {}

Trainer::Trainer(const TrainingArguments& args, Model& model, const TrainData* data,
                 const TrainData* eval, dist::Communicator* comm)
    : Trainer(args, model, nullptr, data, eval, comm) {}

DataShard Trainer::shard() const {
  return DataShard{comm_->rank(), comm_->size()};
}

Trainer::Trainer(const TrainingArguments& args, Model& model, std::unique_ptr<TrainData> owned,
                 const TrainData* data, const TrainData* eval, dist::Communicator* comm)
    : args_(args),
      model_(model),
      owned_data_(std::move(owned)),
      data_(owned_data_ ? owned_data_.get() : data),
      eval_(eval) {
  args_.validate();
  if (comm == nullptr) own_comm_ = std::make_unique<dist::SingleProcess>();
  comm_ = comm != nullptr ? comm : own_comm_.get();
  // GPU ranks need the NCCL communicator (device buffers); CPU ranks any.
  SNUG_CHECK(world() == 1 || model_.device().is_meta() ||
                 std::string(model_.device().name()) == "cpu" || comm_->name() == "nccl",
             "data parallelism over ", world(), " ranks on --device ", model_.device().name(),
             " needs the NCCL communicator (this run has ", comm_->name(), "); CPU ranks use MPI");
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
  OptimizerOptions o = args_.optimizer_options();
  // --offload-optimizer cpu (train/offload.h): the state in the host pool, at every ZeRO stage
  // (the rank's pieces' state).
  o.state_device = offload_host(model_.device(), args_);
  configure_model(model_, args_);
  const bool fp16 = args_.compute_dtype() == ComputeDType::f16;
  if (fp16) scaler_ = std::make_unique<GradScaler>();
  // Quantized base, LoRA adapters (freezing the base), --freeze, NEFTune, before the optimizer
  // exists: frozen parameters get no state and no gradient.
  prepare_model(model_, args_);
  // What a real run of these flags cannot do yet, before the ZeRO layouts are made: a plan
  // (meta) counts such a run to the byte and says it is a plan only (unbuilt()) in the words the
  // run stops with.
  unbuilt_ = offload_unbuilt(model_.device(), args_);  // a plan for a GPU (its run stopped above)
  SNUG_CHECK(model_.device().is_meta() || unbuilt_.empty(), unbuilt_);
  if (args_.zero_stage == 3) {
    // ZeRO 3 (train/zero3_params.h): each trainable parameter partitioned over the ranks, a
    // block's parameters gathered while it runs; the rank's optimizer over its slices.
    check_zero3_settings(args_, model_);
    // --offload-param cpu (train/offload.h): the shards in the host pool, each block gathered
    // from there onto the device. The pieces view the shards: their state is put on the device
    // by name, unless --offload-optimizer cpu puts it in the host pool too.
    Device* const shard_home = offload_param_host(model_.device(), args_);
    zero3_ =
        std::make_unique<Zero3Parameters>(model_.parameters(), *comm_, model_.device(), shard_home);
    model_.set_parameter_gatherer(zero3_.get());
    OptimizerOptions o3 = o;
    if (shard_home != nullptr && o3.state_device == nullptr) o3.state_device = &model_.device();
    auto z = std::make_unique<ZeroOptimizer>(args_.optim, *zero3_, o3, *comm_, model_.device());
    zero_ = z.get();
    optimizer_ = std::move(z);
  } else if (args_.zero_stage >= 1) {
    // ZeRO 1/2 (train/zero_optimizer.h): the trainable weights in DeepSpeed's flat layout, the
    // rank's optimizer over its slice of it.
    auto z = std::make_unique<ZeroOptimizer>(args_.optim, model_.parameters(), o, args_.zero_stage,
                                             *comm_, model_.device());
    zero_ = z.get();
    optimizer_ = std::move(z);
  } else {
    optimizer_ = make_optimizer(args_.optim, model_.parameters(), o);
  }
  fused_ = dynamic_cast<InBackwardOptimizer*>(optimizer_.get());
  if (fused_) check_fused_settings(args_.optim, args_.gradient_accumulation_steps);
  SNUG_CHECK(!fused_ || o.state_device == nullptr, "--offload-optimizer cpu with --optim ",
             args_.optim,
             ": its update is fused into backward on the device, so there is no separate "
             "update to run on the host (drop the flag, or use another --optim)");
  SNUG_CHECK(!fused_ || world() == 1, "--optim ", args_.optim, " over ", world(),
             " ranks: its update runs inside backward, before the gradients could be summed "
             "across the ranks; data parallelism does not support it yet (run it on one "
             "process, or use another --optim)");
  // Data parallelism: dropout masks and NEFTune's noise drawn at this rank's rows of the global
  // batch, as one process draws them (nn/run_context.h).
  if (world() > 1)
    model_.set_first_row(static_cast<int64_t>(rank()) * args_.per_device_train_batch_size);
  if (bucketed()) {
    // The window's last backward (stage 2: every backward) hands each gradient to the buckets as
    // soon as it is final (train/grad_sync.h), so their all-reduces run while backward goes on.
    bucket_listener_ = std::make_unique<GradReadySubscription>(
        model_, [this](Parameter& p, const GradReadyInfo& info) {
          if (!buckets_ || (!info.last_micro_batch && !sharded_gradients())) return;
          const auto t0 = std::chrono::steady_clock::now();
          buckets_->add(p);
          communication_s_ +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        });
  }
  if (args_.max_steps > 0) {
    total_steps_ = args_.max_steps;
  } else {
    SNUG_CHECK(data_, "--max-steps is required when no dataset is read (device meta)");
    const auto probe =
        data_->batches(args_.per_device_train_batch_size, args_.seq_len, args_.seed, true, shard());
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
  // holds no other run's checkpoints (train/output_dir.h). Ranks: rank 0 takes the lock and
  // prepares the folder first; the others (the same job: SNUG_JOB_ID) share the lock after.
  if (real && args_.save_steps > 0) {
    if (rank() == 0) {
      output_lock_ = std::make_unique<OutputDirLock>(args_.output_dir);
      removed_checkpoints_ =
          prepare_output_dir(args_.output_dir, run_record_, resuming, args_.overwrite_output_dir);
    }
    comm_->barrier();
    if (rank() != 0) output_lock_ = std::make_unique<OutputDirLock>(args_.output_dir);
  }
}

Trainer::~Trainer() {
  if (zero3_) model_.set_parameter_gatherer(nullptr);
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
  for (std::string& change : world_changes(saved.config, world(), args_, where))
    resume_changes_.push_back(std::move(change));
  // ZeRO's shards, or a sharded checkpoint resumed at stage 0: the state re-cut to this run's
  // layout (train/zero_checkpoint.h); else optimizer.safetensors as it is.
  OptimizerStateFiles opt_files;
  if (zero_ != nullptr || is_sharded_checkpoint(saved.files))
    opt_files.load = [this](const std::string& d, const nlohmann::json& files) {
      load_recut_optimizer_state(d, files, *optimizer_, zero_, model_.parameters());
    };
  // Stage 3: each rank reads its slices of the weights (load_checkpoint, Parameter::shard).
  const CheckpointState st = load_checkpoint(dir, model_, *optimizer_, opt_files);
  SNUG_CHECK(st.step <= total_steps_, dir, ": checkpoint is at step ", st.step,
             ", beyond the run's ", total_steps_, " steps");
  if (data_) {
    const auto probe =
        data_->batches(args_.per_device_train_batch_size, args_.seq_len, args_.seed, true, shard());
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

TrainResult Trainer::train(TrainCallback* callback) {
  using clock = std::chrono::steady_clock;
  const int64_t B = args_.per_device_train_batch_size, T = args_.seq_len;
  const bool real = !model_.device().is_meta();
  TrainResult r;
  r.total_steps = total_steps_;
  r.steps = start_step_;
  r.resumed_from_step = start_step_;
  // A dry run given the run's data (plan/dry_run.h) reads and evaluates it as the run does, on
  // meta, so that every micro-batch has the run's shape; without data it assumes full rows.
  TrainWindow w(data_, B, T, args_.gradient_accumulation_steps, args_.seed,
                args_.dataloader_num_workers, model_.device(), data_epoch_, data_position_,
                shard());
  if (!w.has_data() && task_ == ModelTask::sequence_classification) {
    // A dry run without data: label 0 for every row, in the layout the head takes.
    const std::vector<int32_t> zeros(static_cast<size_t>(B), 0);
    for (int64_t micro = 0; micro < w.accum; ++micro)
      row_labels(&w.targets[static_cast<size_t>(micro * B * T)], zeros.data(), B, T);
  }
  // A dry run of a run's data replays each of its steps, but those whose shapes repeat.
  ReplayMemo memo(skip_repeats_ && !real && w.has_data() && !optimizer_->memory_varies_by_step());
  const auto t0 = clock::now();
  try {
    for (int64_t step = start_step_; step < total_steps_; ++step) {
      read_window(w, step);
      const double lr = args_.learning_rate * lr_multiplier(args_.lr_scheduler_type, step,
                                                            total_steps_, args_.warmup_steps);
      StepOutcome s;  // a step a dry run skips has a meta step's values
      if (!memo.skip_step(w.cols, step > start_step_)) s = run_step(w, step, lr);
      log_step(r, w, s, lr, std::chrono::duration<double>(clock::now() - t0).count(), callback);
      if (eval_ != nullptr && args_.eval_steps > 0 && r.steps % args_.eval_steps == 0)
        run_eval(r, callback);
      if (real && args_.save_steps > 0 && r.steps % args_.save_steps == 0) save(r, w);
    }
    finish(r, callback);
  } catch (const OutOfMemoryError& e) {
    r.error = e.what();
    r.out_of_memory = true;
  } catch (const Error& e) {
    r.error = e.what();
  }
  r.runtime_s = std::chrono::duration<double>(clock::now() - t0).count();
  r.loss_scale = scaler_ ? scaler_->scale() : 0.0;
  r.communication_s = communication_s_;
  r.world_size = world();
  return r;
}

}  // namespace snug

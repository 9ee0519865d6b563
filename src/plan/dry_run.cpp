#include "plan/dry_run.h"

#include <algorithm>

#include "core/device.h"
#include "core/error.h"
#include "data/sft_data.h"
#include "dist/meta_world.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "train/trainer.h"
#include "train/zero3_init.h"

namespace snug {

namespace {

// The optimizer steps a full-rows dry run replays: two (the second holds the optimizer state, so
// it contains the peak of any longer run), or the run's one.
int64_t full_rows_steps(const TrainingArguments& args) {
  return args.max_steps > 0 ? std::min<int64_t>(args.max_steps, 2) : 2;
}

}  // namespace

DryRun replay(const TrainingArguments& args, const DryRunData& data,
              std::vector<MemoryEvent>* timeline) {
  const int world_size = data.world_size;
  SNUG_CHECK(world_size >= 1, "dry run: world size ", world_size, " (at least 1)");
  TrainingArguments a = args;
  a.kernel_device = args.kernels_device();  // a plan for cuda replays cuda's kernel choices
  a.device = "meta";
  // Replayed: the run's own steps (--max-steps, or its epochs of the data).
  if (data.train == nullptr) a.max_steps = full_rows_steps(args);
  a.report_json.clear();
  Device dev(meta_backend());
  keep_pages_of(dev, a.kernel_device);
  dev.pool().enable_timeline(timeline != nullptr);
  // --zero-stage 3: partitioned as the model is made, as the run does (train/zero3_init.h).
  std::unique_ptr<nn::ConstructionPartition> zero3 = zero3_init(a, dev, 0, world_size);
  const auto model = create_model(a.model_config(), dev, a.param_dtype(), a.weight_quant());
  // Full rows: the evaluation, when the run has one, is one batch of full rows.
  const FullRowsData full_rows;
  const TrainData* eval = data.train != nullptr ? data.eval
                          : args.has_eval()     ? &full_rows
                                                : nullptr;
  dist::MetaWorld world(0, world_size);
  Trainer trainer(a, *model, data.train, eval, world_size > 1 ? &world : nullptr);
  zero3.reset();
  trainer.set_skip_repeated_shapes(true);
  const TrainResult r = trainer.train();
  SNUG_CHECK(r.error.empty(), "dry run failed: ", r.error);
  if (timeline) *timeline = dev.pool().timeline();
  DryRun d;
  d.memory = dev.pool().stats();
  d.unbuilt = trainer.unbuilt();
  if (&dev.host() != &dev) d.host = dev.host().pool().stats();
  DryRunBatches& b = d.batches;
  b.replayed = data.train != nullptr;
  b.steps = r.steps;
  b.rows = a.per_device_train_batch_size;
  b.accumulation = a.gradient_accumulation_steps;
  b.longest = r.longest_batch;
  b.seq_len = a.seq_len;
  b.evaluations = static_cast<int64_t>(r.evals.size());
  b.eval_rows = a.per_device_eval_batch_size;
  b.packed = data.train != nullptr && data.train->packed();
  if (data.train != nullptr) b.data = data.train->describe();
  return d;
}

MemoryStats dry_run(const TrainingArguments& args, const DryRunData& data,
                    std::vector<MemoryEvent>* timeline) {
  return replay(args, data, timeline).memory;
}

MemoryStats dry_run(const TrainingArguments& args, std::vector<MemoryEvent>* timeline) {
  return replay(args, {}, timeline).memory;
}

bool plan_reads_data(const TrainingArguments& args) {
  return is_jsonl_spec(args.data) || (!args.eval_data.empty() && is_jsonl_spec(args.eval_data));
}

std::string plan_only_line(const std::string& unbuilt) {
  return "plan only: a real run of these flags is refused today: " + unbuilt;
}

std::string describe_batches(const DryRunBatches& b) {
  const std::string steps = detail::concat(
      b.steps, b.steps == 1 ? " optimizer step" : " optimizer steps", " of ", b.accumulation,
      b.accumulation == 1 ? " micro-batch" : " micro-batches", " of ", b.rows, " rows");
  const std::string evals =
      b.evaluations == 0
          ? std::string("no evaluation")
          : detail::concat(b.evaluations, b.evaluations == 1 ? " evaluation" : " evaluations");
  if (!b.replayed)
    return detail::concat(
        "batches: full rows assumed (no data read): ", steps, " x ", b.seq_len, " tokens, ", evals,
        b.evaluations > 0 ? detail::concat(" of ", b.eval_rows, " rows x ", b.seq_len, " tokens")
                          : std::string(),
        " (a token stream's batches are full rows)");
  return detail::concat("batches: replayed from ", b.data, ": ", steps, " x at most ", b.longest,
                        " tokens", b.packed ? " (packed, with position ids)" : "", ", ", evals);
}

nlohmann::json batches_json(const DryRunBatches& b) {
  nlohmann::json j = {{"assumption", b.replayed ? "replayed" : "full_rows"},
                      {"steps", b.steps},
                      {"rows", b.rows},
                      {"gradient_accumulation_steps", b.accumulation},
                      {"longest_cols", b.longest},
                      {"seq_len", b.seq_len},
                      {"evaluations", b.evaluations},
                      {"eval_rows", b.eval_rows},
                      {"packed", b.packed}};
  if (b.replayed) j["data"] = b.data;
  return j;
}

}  // namespace snug

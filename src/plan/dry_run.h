// Dry runs: a training run replayed on the meta device (shapes only, the same code as a real
// run, so the bytes are exact) for its peak memory. Plan, estimate, what-if, the fit searches
// and the advisor all start here.
//
// The bytes of a step depend on the shapes of its micro-batches: rows x columns, and position
// ids for packed rows. A dry run makes them one of two ways:
//   replayed   given the run's data (DryRunData), the Trainer reads it on meta as the run will:
//              the same examples, seed, order, padding to each batch's longest row, packing,
//              every optimizer step of the run and every evaluation. The peak is the run's, to
//              the byte.
//   full rows  without data, every micro-batch is assumed to be batch x seq_len tokens with no
//              position ids, over min(--max-steps, 2) optimizer steps (the second holds the
//              optimizer state, so it contains the peak of any longer run), and an evaluation
//              (when the run has one) is one batch of --per-device-eval-batch-size full rows at
//              the end (and at --eval-steps within the two steps). Nothing is read or
//              tokenized, so it takes milliseconds. For a token stream (dummy, builtin, token
//              and text files) that is what the run's batches are (its evaluation, if it has
//              fewer windows than a batch, is smaller); jsonl examples are shorter rows, padded
//              per batch or packed, which only a replay knows.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/memory.h"
#include "data/batches.h"
#include "train/training_args.h"

namespace snug {

// What a dry run replays: the data (both may be null: full rows; the caller keeps them alive)
// and the world the process is rank 0 of. Every planner (the plan, the what-if table, the fit
// searches, the advisor, the memory timeline) replays through one, so each answers for a rank of
// the run's world: `snug plan --world-size N`.
struct DryRunData {
  const TrainData* train = nullptr;
  const TrainData* eval = nullptr;  // evaluated as the run does (--eval-steps and at the end)
  // > 1: rank 0 of a data-parallel run of that many ranks (ZeRO stage args.zero_stage;
  // dist/meta_world.h): its share of the data and the buffers its collectives use (the gradient
  // bucket, train/grad_sync.h; its slices of the flat layout's state and gradients at stages
  // 1-2, train/zero_optimizer.h, and of the parameters at stage 3, train/zero3_params.h).
  int world_size = 1;
};

// What a dry run's batches were.
struct DryRunBatches {
  bool replayed = false;     // the run's data was read; false: full rows assumed
  int64_t steps = 0;         // optimizer steps replayed
  int64_t rows = 0;          // rows per micro-batch
  int64_t accumulation = 1;  // micro-batches per optimizer step
  int64_t longest = 0;       // the most columns of any micro-batch (seq_len for full rows)
  int64_t seq_len = 0;       // --seq-len
  int64_t evaluations = 0;   // evaluation passes replayed
  int64_t eval_rows = 0;     // rows per evaluation batch (--per-device-eval-batch-size)
  bool packed = false;       // rows of several examples, with position ids
  std::string data;          // what was replayed (replayed only)
};

struct DryRun {
  MemoryStats memory;
  // Why a real run of these arguments is refused today, for a feature not built yet (Trainer::
  // unbuilt(); "" when it runs). Such a run is a plan only: the plan says so, and the planners
  // that offer alternatives (what-if, advisor, ZeRO stages) do not offer it.
  std::string unbuilt;
  // The host pool, where the device has one apart (--offload-optimizer cpu: train/offload.h).
  std::optional<MemoryStats> host;
  DryRunBatches batches;
};

// `args` replayed on the meta device with `data` (no data: full rows) as rank 0 of
// data.world_size ranks. With `timeline`, every allocation and free is recorded into it
// (core/memory.h MemoryEvent).
DryRun replay(const TrainingArguments& args, const DryRunData& data,
              std::vector<MemoryEvent>* timeline = nullptr);
// Its memory only.
MemoryStats dry_run(const TrainingArguments& args, const DryRunData& data,
                    std::vector<MemoryEvent>* timeline = nullptr);
// Full rows (no data).
MemoryStats dry_run(const TrainingArguments& args, std::vector<MemoryEvent>* timeline = nullptr);

// Whether `snug plan` reads the data of `args` to replay it: when --data or --eval-data is jsonl
// (examples, whose batches are not full rows). Token streams are planned as full rows, which is
// what their training batches are, without reading them.
bool plan_reads_data(const TrainingArguments& args);

// One line for plan's output: what the batches of the dry run were ("batches replayed from
// ...: 150 steps of 16 rows x at most 29 tokens, 7 evaluations" or "batches assumed full rows:
// ...").
std::string describe_batches(const DryRunBatches& b);

// The line that says a plan is a plan only (`unbuilt`: DryRun::unbuilt, not empty), for `snug
// plan` and `snug train --device meta` alike: "plan only: a real run of these flags is refused
// today: ...".
std::string plan_only_line(const std::string& unbuilt);
// The plan JSON's "batch_shapes" (docs/report.md).
nlohmann::json batches_json(const DryRunBatches& b);

}  // namespace snug

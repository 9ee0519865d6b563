// One accumulation window of training micro-batches: the Trainer's first step of every optimizer
// step (train/trainer.h). The window is read whole before any forward so that every
// micro-batch's loss can be normalized by the window's total number of target tokens (not per
// micro-batch: the gradient-accumulation bug transformers fixed in 4.46), so that B=8 x 1 and
// B=2 x 4 over the same samples give the same loss and the same update. In a data-parallel run
// that count is summed across ranks before backward (Trainer::synchronise_targets).
//
// Host buffers, B*T*accum int32 each: micro-batch m is (B, cols[m]) at offset m*B*T (cols[m] <= T:
// padded jsonl examples are as wide as their batch's longest row).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "core/device.h"
#include "data/batches.h"
#include "data/prefetch.h"

namespace snug {

struct TrainWindow {
  // Makes micro-batch `micro` (B, cols) in place (the task's collator, the labels), given the
  // loader's state before it (epoch, position) and the loader.
  using Prepare = std::function<void(int32_t* inputs, int32_t* targets, int64_t cols, int64_t micro,
                                     int64_t epoch, int64_t position, const BatchSource& source)>;

  // Reads `data` in (batch, seq_len) micro-batches, `steps` a window, from (start_epoch,
  // start_position) through a prefetcher of `num_workers` (data/prefetch.h);
  // `data` null (a dry run without data): nothing is read, the columns stay T and the inputs
  // and targets 0, but the staging slots a run's prefetcher would hold are allocated. `shard`:
  // this rank's rows of each batch of shard.world * batch (data/batches.h's DataShard).
  TrainWindow(const TrainData* data, int64_t batch, int64_t seq_len, int64_t steps, uint64_t seed,
              int num_workers, Device& dev, int64_t start_epoch, int64_t start_position,
              const DataShard& shard = {});

  bool has_data() const { return loader != nullptr; }
  bool has_positions() const { return !positions.empty(); }
  // The next `accum` micro-batches, each prepared; counts valid_targets and advances the
  // loader's state (epoch, position). Needs data.
  void read(const Prepare& prepare);

  int64_t B, T, accum;
  std::vector<int32_t> inputs, targets, positions;  // positions: packed rows only
  std::vector<int64_t> cols;                        // per micro-batch
  int64_t valid_targets = 0;                        // targets >= 0 in the window, this process's
  // The loader's state after the last micro-batch the loop consumed (the prefetcher reads ahead,
  // so the loader itself may be further): what a checkpoint records.
  int64_t epoch, position;

  // Declared in destruction order's reverse: the prefetcher's thread reads the loader.
  std::unique_ptr<BatchSource> loader, slot_shapes;
  std::unique_ptr<Prefetcher> prefetch;
};

}  // namespace snug

#include "train/train_window.h"

#include "core/error.h"

namespace snug {

TrainWindow::TrainWindow(const TrainData* data, int64_t batch, int64_t seq_len, int64_t steps,
                         uint64_t seed, int num_workers, Device& dev, int64_t start_epoch,
                         int64_t start_position, const DataShard& shard)
    : B(batch), T(seq_len), accum(steps), epoch(start_epoch), position(start_position) {
  if (data) {
    loader = data->batches(B, T, seed, true, shard);
    loader->seek(epoch, position);
    prefetch = std::make_unique<Prefetcher>(*loader, num_workers, 2, dev);
  } else if (num_workers > 0) {
    // A dry run without data reads nothing but holds the staging slots a run's prefetcher would.
    slot_shapes = FullRowsData().batches(B, T, seed, true, shard);
    prefetch = std::make_unique<Prefetcher>(*slot_shapes, num_workers, 2, dev);
  }
  inputs.assign(static_cast<size_t>(B * T * accum), 0);
  targets.assign(inputs.size(), 0);
  positions.assign(loader && loader->has_positions() ? inputs.size() : 0, 0);
  cols.assign(static_cast<size_t>(accum), T);
}

void TrainWindow::read(const Prepare& prepare) {
  SNUG_ASSERT(loader != nullptr, "TrainWindow::read without data");
  const int64_t windows = loader->items_per_epoch();
  valid_targets = 0;
  for (int64_t micro = 0; micro < accum; ++micro) {
    const auto off = static_cast<size_t>(micro * B * T);
    const int64_t c =
        prefetch->next(&inputs[off], &targets[off], has_positions() ? &positions[off] : nullptr);
    cols[static_cast<size_t>(micro)] = c;
    if (prepare) prepare(&inputs[off], &targets[off], c, micro, epoch, position, *loader);
    for (int64_t i = micro * B * T; i < micro * B * T + B * c; ++i)
      valid_targets += targets[static_cast<size_t>(i)] >= 0 ? 1 : 0;
    const int64_t consumed = position + loader->global_batch_size();  // every rank's rows
    epoch += consumed / windows;
    position = consumed % windows;
  }
}

}  // namespace snug

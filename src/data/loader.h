// DataLoader: cuts a TokenSource into training batches.
//
// The stream of N tokens is cut into W = (N - 1) / T non-overlapping windows of T + 1 tokens with
// stride T (window w covers tokens [w*T, w*T + T]); a trailing remainder shorter than a window is
// not used. Each epoch visits all W windows once, in a random permutation that depends only on
// (seed, epoch) (like HF Trainer's RandomSampler reshuffling per epoch). next() takes the next B
// windows of that order: inputs are tokens [0, T) of a window, targets tokens [1, T + 1), i.e.
// the inputs shifted left by one. When an epoch's windows run out (possibly within a batch) the
// next epoch begins with a fresh permutation. The state is (epoch, position), position being the
// number of windows of the current epoch already consumed; seek() restores it exactly, so a
// resumed run sees the same batches as an uninterrupted one.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "data/batches.h"
#include "data/dataset.h"

namespace snug {

class DataLoader final : public BatchSource {
 public:
  // The source must outlive the loader. Throws snug::Error if B < 1, T < 1, or the source has
  // fewer than T + 1 tokens. shuffle false: windows in order, every epoch (evaluation).
  // `shard`: this process's share of batches of world * B windows (data/batches.h).
  DataLoader(const TokenSource& source, int64_t B, int64_t T, uint64_t seed, bool shuffle = true,
             const DataShard& shard = {});
  // A temporary source would dangle.
  DataLoader(const TokenSource&& source, int64_t B, int64_t T, uint64_t seed, bool shuffle = true,
             const DataShard& shard = {}) = delete;

  // Fills inputs and targets, each B*T int32 in row-major (B, T) order (next_rows of B rows).
  void next(int32_t* inputs, int32_t* targets);
  // Same, into i32 tensors of shape (B, T) (e.g. allocated under Category::input_data); throws
  // snug::Error on a wrong shape or dtype; on a meta tensor only advances the state.
  void next(Tensor& inputs, Tensor& targets);

  // BatchSource: next_rows reads `rows` windows; cols is always T.
  int64_t items_per_epoch() const override { return windows_; }

  int64_t epoch() const override { return epoch_; }
  int64_t position() const override { return position_; }
  // Restores the state; requires epoch >= 0 and 0 <= position < windows_per_epoch().
  void seek(int64_t epoch, int64_t position) override;

  int64_t batch_size() const override { return B_; }
  int64_t seq_len() const override { return T_; }
  uint64_t seed() const { return seed_; }
  int64_t windows_per_epoch() const { return windows_; }
  // Batches that make up one epoch: ceil(windows_per_epoch / B) (the last may run into the
  // next epoch).
  // The window index (0..W-1) visited at `position` of `epoch`: exposed for tests and tools.
  int64_t window_at(int64_t epoch, int64_t position) const;
  // window_at, with positions past the epoch's end in the next epochs.
  int64_t sample_at(int64_t epoch, int64_t position) const override {
    return window_at(epoch + position / windows_, position % windows_);
  }

 protected:
  int64_t read_rows(int64_t rows, int32_t* inputs, int32_t* targets, int32_t* positions) override;
  void skip_rows(int64_t rows) override;  // without reading the source

 private:
  std::vector<uint32_t> permutation(int64_t windows, uint64_t seed, int64_t epoch) const;
  void advance();  // past one window

  const TokenSource& source_;
  int64_t B_;
  int64_t T_;
  uint64_t seed_;
  bool shuffle_;
  int64_t windows_ = 0;
  int64_t epoch_ = 0;
  int64_t position_ = 0;
  std::vector<uint32_t> order_;   // permutation of the current epoch
  std::vector<int32_t> scratch_;  // one window
};

}  // namespace snug

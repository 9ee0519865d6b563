// What the Trainer reads batches from, whatever the data: a token stream cut into windows
// (data/loader.h) or jsonl examples (data/sft_data.h) padded or packed into rows.
//
// A batch is `rows` rows of `cols` tokens, row-major (rows, cols): inputs, targets (the label of
// the next token; -100, kIgnoreIndex, where nothing is learned) and, for packed rows, position
// ids that restart at 0 where a document starts (Model::set_position_ids: attention stays
// within documents). cols varies per batch for padded examples (the longest row of the batch,
// as TRL's collator pads) and never exceeds seq_len(); callers size buffers batch_size() x
// seq_len().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/sft_data.h"

namespace snug {

// The share of every batch one process reads, for data parallelism (issue 30): the data is read
// as one process reads batches of world * B rows, and rank r keeps rows [r*B, (r+1)*B) of each.
// So `world` ranks reading B rows each see together exactly the rows, in the same order, that one
// process reading world * B sees: the same shuffle, the same packing, the same length grouping
// (its megabatches count global batches). Padded examples are padded to the longest row of the
// rank's own B rows, as each rank's collator pads its own batch. Every rank keeps the whole
// loader's state (epoch, position count the rows of all ranks), so that a checkpoint's data state
// is the same on each. world 1, rank 0: the whole batch.
struct DataShard {
  int64_t rank = 0;
  int64_t world = 1;
};

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual int64_t batch_size() const = 0;  // this process's rows per batch (B)
  virtual int64_t seq_len() const = 0;
  // Packed rows carry position ids.
  virtual bool has_positions() const { return false; }
  // Fills this process's `rows` (1..batch_size()) rows of the next batch of world * rows rows
  // (rows [rank * rows, (rank + 1) * rows) of it; see DataShard); returns cols. Null pointers
  // are skipped (the state still advances). `positions` is written only when has_positions().
  int64_t next_rows(int64_t rows, int32_t* inputs, int32_t* targets, int32_t* positions);
  // Rows (windows or examples) one epoch visits, each once (by all ranks together).
  virtual int64_t items_per_epoch() const = 0;
  virtual int64_t epoch() const = 0;
  virtual int64_t position() const = 0;  // rows of the current epoch consumed (by all ranks)
  virtual void seek(int64_t epoch, int64_t position) = 0;
  // The sample row `position` of `epoch` reads (positions past the epoch's end continue into the
  // next epochs): what --data dummy's labels are keyed by (data/collator.h). Only a token
  // stream's windows (data/loader.h) are such samples; any other source fails an assertion.
  virtual int64_t sample_at(int64_t epoch, int64_t position) const;
  const DataShard& shard() const { return shard_; }
  // Rows every rank together consumes per batch: world * batch_size().
  int64_t global_batch_size() const { return shard_.world * batch_size(); }
  // Batches that make up one epoch (the last may run into the next epoch).
  int64_t batches_per_epoch() const {
    return (items_per_epoch() + global_batch_size() - 1) / global_batch_size();
  }

 protected:
  // Throws snug::Error unless 0 <= rank < world.
  explicit BatchSource(const DataShard& shard);
  // The next `rows` (1..batch_size()) rows in the source's order, whichever rank's they are.
  virtual int64_t read_rows(int64_t rows, int32_t* inputs, int32_t* targets,
                            int32_t* positions) = 0;
  // Passes over `rows` rows (any number: the other ranks'), the state advancing as reading them
  // would. By default, read into nothing, at most batch_size() at a time.
  virtual void skip_rows(int64_t rows);

 private:
  DataShard shard_;
};

// How examples become rows.
struct ExampleBatching {
  bool shuffle = true;  // a new permutation per epoch, keyed by (seed, epoch); false: file order
  // Rows of several examples (best-fit decreasing, as TRL's "bfd"), documents kept apart by
  // position ids; else one example per row, padded to the batch's longest.
  bool packing = false;
  // Batches of similar lengths (the Trainer's LengthGroupedSampler: within megabatches of 50
  // batches, longest first), so that padding wastes little.
  bool group_by_length = false;
  int32_t pad_id = 0;
};

class ExampleLoader final : public BatchSource {
 public:
  // `examples` must outlive the loader; each must be at most T tokens (load_sft_data cuts them).
  // B: this process's rows per batch (`shard`: its share of batches of world * B rows).
  ExampleLoader(const std::vector<Example>& examples, int64_t B, int64_t T, uint64_t seed,
                const ExampleBatching& how, const DataShard& shard = {});
  int64_t batch_size() const override { return B_; }
  int64_t seq_len() const override { return T_; }
  bool has_positions() const override { return how_.packing; }
  int64_t items_per_epoch() const override { return static_cast<int64_t>(rows_.size()); }
  int64_t epoch() const override { return epoch_; }
  int64_t position() const override { return position_; }
  void seek(int64_t epoch, int64_t position) override;

  // The examples of each row (one without packing), as laid out: exposed for tests.
  const std::vector<std::vector<int32_t>>& rows() const { return rows_; }
  // The row visited at `position` of the current epoch.
  int64_t row_at(int64_t position) const { return order_[static_cast<size_t>(position)]; }

 protected:
  int64_t read_rows(int64_t rows, int32_t* inputs, int32_t* targets, int32_t* positions) override;
  void skip_rows(int64_t rows) override;

 private:
  std::vector<uint32_t> order(int64_t epoch) const;
  int64_t row_length(int64_t row) const;
  void advance();  // past one row

  const std::vector<Example>& ex_;
  int64_t B_, T_;
  uint64_t seed_;
  ExampleBatching how_;
  std::vector<std::vector<int32_t>> rows_;
  int64_t epoch_ = 0, position_ = 0;
  std::vector<uint32_t> order_;
};

// Training or evaluation data: makes the loader for a batch shape (B rows per process; `shard`:
// which share of the batches of world * B rows this process reads).
class TrainData {
 public:
  virtual ~TrainData() = default;
  virtual std::unique_ptr<BatchSource> batches(int64_t B, int64_t T, uint64_t seed, bool shuffle,
                                               const DataShard& shard = {}) const = 0;
  virtual std::string describe() const = 0;
  // Packed rows: the model must take position ids.
  virtual bool packed() const { return false; }
};

// A token stream (builtin, dummy, token or text file) in windows of T + 1 (data/loader.h).
class TokenStreamData final : public TrainData {
 public:
  explicit TokenStreamData(std::shared_ptr<const TokenSource> src) : src_(std::move(src)) {}
  std::unique_ptr<BatchSource> batches(int64_t B, int64_t T, uint64_t seed, bool shuffle,
                                       const DataShard& shard = {}) const override;
  std::string describe() const override { return src_->describe(); }
  const TokenSource& source() const { return *src_; }

 private:
  std::shared_ptr<const TokenSource> src_;
};

class ExampleData final : public TrainData {
 public:
  ExampleData(std::vector<Example> examples, std::string describe, ExampleBatching how)
      : ex_(std::move(examples)), describe_(std::move(describe)), how_(how) {}
  std::unique_ptr<BatchSource> batches(int64_t B, int64_t T, uint64_t seed, bool shuffle,
                                       const DataShard& shard = {}) const override;
  std::string describe() const override { return describe_; }
  bool packed() const override { return how_.packing; }
  const std::vector<Example>& examples() const { return ex_; }

 private:
  std::vector<Example> ex_;
  std::string describe_;
  ExampleBatching how_;
};

// Shapes without data: every batch is B full rows of T tokens (ids 0, every target 0, no position
// ids), an epoch one batch. A dry run's stand-in for data it does not read (plan/dry_run.h).
class FullRowsData final : public TrainData {
 public:
  std::unique_ptr<BatchSource> batches(int64_t B, int64_t T, uint64_t seed, bool shuffle,
                                       const DataShard& shard = {}) const override;
  std::string describe() const override { return "full rows"; }
};

// Where `--data`/`--eval-data` and the options that shape them meet (filled from the flags by
// TrainingArguments::data_options, train/training_args.h).
struct DataOptions {
  std::string data = "builtin", eval_data;
  double eval_split = 0.0;  // (0, 1): this share of the training data becomes the eval data
  std::string tokenizer;    // tokenizer.json or a folder; "" = beside the model's config.json
  std::string model;        // --model, to find the tokenizer beside a config.json
  SftOptions sft;
  bool packing = false, group_by_length = false;
  int64_t seq_len = 128;
  int64_t vocab_size = 0;  // the model's: every id must be below it
  uint64_t seed = 42;
};

struct OpenedData {
  std::unique_ptr<TrainData> train, eval;  // eval null when there is none
};

// Opens --data (and --eval-data or the --eval-split share of it). A token stream split keeps its
// first tokens for training and its last ceil(share * N) for evaluation; jsonl records are split
// by a seeded permutation (HF datasets' train_test_split: ceil(share * n) records for eval).
OpenedData open_data(const DataOptions& o);

}  // namespace snug

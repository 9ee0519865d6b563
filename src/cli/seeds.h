// `snug bench seeds`: the experiment matrix of the Hugging Face guide "Efficient training on a
// single GPU" (in the seeds), run for real on the cpu device, and the batch-size sweep of the
// seeds' chapter on single-GPU memory, run as dry runs on the meta device.
//
// The guide trains bert-large-uncased on a 16 GB V100 with 512 dummy sequences of 512 tokens and
// prints, per configuration, Time (train_runtime), Samples/second and "GPU memory occupied"
// (nvidia-smi). Here every row is a TrainingArguments variation of one base (B=4, dummy data,
// adamw_torch), each optimizer step sees 4 samples in every row, and "Memory occupied" is the
// device pool's peak (MB = bytes / 2^20), split by category.
//
// Rows (the guide's order; bf16 is mentioned by the guide but not measured there):
//   vanilla             B=4
//   grad_accum          B=1, accumulation 4
//   grad_ckpt           B=1, accumulation 4, gradient checkpointing
//   fp16                B=4, fp16
//   bf16                B=4, bf16
//   combined            B=1, accumulation 4, checkpointing, fp16
//   adafactor           B=4, optim adafactor
//   adafactor_combined  B=1, accumulation 4, checkpointing, fp16, optim adafactor
//   adamw_8bit          B=4, optim adamw_bnb_8bit
//   all                 B=1, accumulation 4, checkpointing, fp16, optim adamw_bnb_8bit
// A row whose optimizer is not in optimizer_names() is not available.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/memory.h"
#include "train/training_args.h"

namespace snug {

struct SeedsOptions {
  std::string model = "gpt2-tiny";
  std::optional<int64_t> seq_len;  // unset: 512 (the seeds'), or the model's context if shorter
  int64_t max_steps = 20;
  std::string data = "dummy";
  std::optional<int64_t> device_memory;  // capacity of every run (bytes)
  int threads = 0;
  uint64_t seed = 42;
};

// One configuration of the matrix.
struct SeedRowSpec {
  std::string name;
  std::string description;  // "B=1, accumulation 4, checkpointing"
  int64_t batch = 4;
  int64_t accumulation = 1;
  bool checkpointing = false;
  std::string precision = "fp32";  // fp32, fp16 or bf16
  std::string optim = "adamw_torch";
};

// One measured (or skipped) row, of the matrix or of the sweep.
struct BenchRow {
  std::string name;
  std::string description;
  TrainingArguments args;
  bool available = false;  // false: not run (note says why)
  std::string note;
  bool dry = false;  // a meta-device dry run: memory only, no time
  double train_runtime = 0;
  double train_samples_per_second = 0;
  MemoryStats memory;
  bool out_of_memory = false;  // the run exceeded args.device_memory
  int64_t need_bytes = 0;      // out_of_memory: the peak the run needs (uncapped dry run)
  std::string error;
};

// The guide's matrix, in its order.
std::vector<SeedRowSpec> seed_matrix();
// The shared arguments of every row: B=4, dummy data, adamw_torch, max_steps, seq_len resolved.
TrainingArguments seeds_base_args(const SeedsOptions& opts);
// `base` with the row's batch, accumulation, checkpointing, precision and optim.
TrainingArguments seed_row_args(const TrainingArguments& base, const SeedRowSpec& spec);

// Called before each row runs (done=false: name, config, availability known) and after it.
using BenchObserver = std::function<void(const BenchRow& row, bool done)>;

// Runs every row of seed_matrix() on the cpu device (a fresh model per row, same seed).
std::vector<BenchRow> run_seed_matrix(const SeedsOptions& opts, const BenchObserver& observe = {});

// The seeds' chapter: vanilla config at B = 4, 8, 16, ... as meta dry runs under `capacity`,
// stopping at the first batch that does not fit (that row has out_of_memory and need_bytes), or
// after `max_batch`.
std::vector<BenchRow> run_batch_sweep(const SeedsOptions& opts, int64_t capacity,
                                      int64_t max_batch = 65536, const BenchObserver& observe = {});

// The table as the seeds print it: row, config, Time (s), Samples/second, Memory occupied (MB).
std::string seeds_table(const std::vector<BenchRow>& rows);
// Peak split by category per row (MB at the global peak) and the peak's phase.
std::string category_table(const std::vector<BenchRow>& rows);
// The sweep as the chapter shows it: batch, category split, total, capacity, fits or OOM.
std::string sweep_table(const std::vector<BenchRow>& rows, int64_t capacity);
// [{name, config, train_runtime, train_samples_per_second, peak_bytes, peak_by_category,
//   max_by_category, available, note, dry, out_of_memory, need_bytes}]
nlohmann::json bench_json(const std::vector<BenchRow>& rows);
// An SVG stacked bar chart of peak memory per row split by category (report/bench_plot.h).
std::string memory_svg(const std::vector<BenchRow>& rows, const std::string& title);

// The guide's own numbers (bert-large-uncased, V100 16 GB, seq 512, 512 samples, one epoch;
// memory from nvidia-smi, which includes about 1.3 GB of CUDA context and kernels).
struct SeedReference {
  std::string name;  // the matching seed_matrix() row
  std::string description;
  double time_s;
  double samples_per_second;
  int64_t memory_mb;
};
std::vector<SeedReference> seeds_reference();
std::string seeds_reference_table();
// nvidia-smi's "GPU memory occupied" after the seeds' torch.ones((1, 1)).to("cuda"): the CUDA
// context and kernels every row of the seeds' table includes.
inline constexpr int64_t kSeedsCudaContextMB = 1343;

// `bench seeds --plan-only`: every row of seed_matrix() as a dry run on meta (two optimizer
// steps) under opts.device_memory, with the seeds' model head (sequence classification, 2 labels,
// when the family has one) and naive attention (the seeds' eager attention), rather than run.
std::vector<BenchRow> run_seed_plan(const SeedsOptions& opts, const BenchObserver& observe = {});
// Per row: the plan's peak (MiB), plus the seeds' CUDA context, the seed's measured figure and the
// difference in percent. The seeds measured bert-large-uncased: for another model (model_name)
// the seed column is shown for scale, labelled so, and no difference is computed.
inline constexpr const char* kSeedsModel = "bert-large-uncased";
std::string seeds_plan_table(const std::vector<BenchRow>& rows, const std::string& model_name);

}  // namespace snug

// ZeRO's per-rank model states (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models", SC'20, section 5 and figure 1) for the bytes a run's layout keeps,
// printed by `snug estimate` beside the plan and searched by `snug plan --advise`. With W, G and
// O the whole model's weights, gradients and optimizer state (the closed form's categories,
// plan/estimate.h) and N ranks:
//   stage 0  W + G + O            every rank holds everything (data parallel)
//   stage 1  W + G + O/N          optimizer state sharded
//   stage 2  W + (G + O)/N        gradients too
//   stage 3  (W + G + O)/N        parameters too
// Under --precision-layout deepspeed W = 2Ψ, G = 2Ψ and O = KΨ with K = 12, the paper's own
// (2 + 2 + K)Ψ, 4Ψ + KΨ/N, 2Ψ + (2 + K)Ψ/N and (2 + 2 + K)Ψ/N; another layout gives its own K
// (AdamW in fp32: 4 + 4 + 8). Each share is rounded up to a byte. What the formulas leave out and
// a plan counts (docs/distributed.md): the flat layout's padding (at most 2N - 1 elements at
// stages 1-2), the gradient buckets, activations and temporaries.
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "plan/dry_run.h"
#include "plan/estimate.h"

namespace snug {

inline constexpr int kZeroStages = 4;

struct ZeroStates {
  int stage = 0;
  std::string formula;  // in bytes per parameter, "4Ψ + 12Ψ/N"
  int64_t bytes = 0;    // per rank
};

// The four stages' model states per rank for `est`'s categories over `world` ranks.
std::array<ZeroStates, kZeroStages> zero_model_states(const MemoryEstimate& est, int64_t world);

// The model states of one rank at `stage` over `world` ranks (zero_model_states' row).
int64_t zero_states_bytes(const MemoryEstimate& est, int stage, int64_t world);

// The table `snug estimate` prints: one row per stage; `plan_states` (weights + gradients +
// optimizer_state of the dry run, each category's maximum) beside the row of the run's own
// `plan_stage`.
std::string zero_states_table(const MemoryEstimate& est, int64_t world, int plan_stage,
                              int64_t plan_states);
nlohmann::json zero_states_json(const MemoryEstimate& est, int64_t world, int plan_stage,
                                int64_t plan_states);

// `snug plan --advise` over ranks: for each stage, the smallest power-of-two world (up to
// max_world) whose rank fits `capacity` (minus `overhead`) with the run's own flags and per-rank
// batch. The search uses the formulas: a rank's peak = the one-process plan's peak - its model
// states + zero_states_bytes(stage, N). At stages 1-3 the world found is then replayed on meta
// (rank 0, dry_run.h's replay: padding, buckets and stage 3's gathered blocks included) and N
// doubled until the replay fits too; runs a stage refuses (optimizers that are not elementwise,
// mixed precision at stage 3) keep the formula's figure, and say why; a replayed run that a real
// run refuses for a feature not built yet (Trainer::unbuilt(): today offload in a plan for a GPU)
// keeps its figure and says it is a plan only.
struct ZeroFit {
  int stage = 0;
  int64_t world = 0;      // 0: none up to max_world fits
  int64_t peak = 0;       // rank 0's bytes at `world` (the last one tried when none fits)
  bool replayed = false;  // peak is a meta replay's, else the formula's
  std::string note;       // why not replayed, or why a real run is refused ("plan only: ...")
};
std::array<ZeroFit, kZeroStages> zero_fits(const TrainingArguments& args, const DryRunData& data,
                                           int64_t capacity, int64_t overhead,
                                           int64_t max_world = 1024);
// `added`: the flags the rows add to the run's (zero_alternatives), "" for the run's own.
std::string zero_fits_table(const std::array<ZeroFit, kZeroStages>& fits, int64_t max_world,
                            const std::string& added = "");
nlohmann::json zero_fits_json(const std::array<ZeroFit, kZeroStages>& fits);

// The switches worth searching over ranks beside the run's own flags, because they change what
// the ranks shard: today --bf16-full (bf16 weights, gradients and state at every stage,
// docs/distributed.md), for a run the what-if table would offer it to (plan/switches.h). Each as
// its flags and the run's arguments with it.
std::vector<std::pair<std::string, TrainingArguments>> zero_alternatives(
    const TrainingArguments& args);

}  // namespace snug

// Checkpoints of ZeRO stages 1-2 (issue 30; docs/checkpoints.md, docs/distributed.md): each rank
// writes the optimizer state of its slice, rank 0 an index, into the checkpoint folder rank 0
// makes (train/checkpoint.h's OptimizerStateFiles; rank 0 writes the weights, the trainer state
// and renames the folder once every shard is in, as at stage 0):
//
//   optimizer.rank-00000-of-00002.safetensors   rank r's state tensors, "<param name>.<state>"
//                                               (1-D pieces; the padding's "zero.padding.*"),
//                                               metadata: optimizer, extra_state (JSON)
//   optimizer.index.json                        {"world_size", "zero_stage", "layout": "flat",
//                                               "numel", "padded", "shard", "shards": [{"file",
//                                               "rank", "begin", "end"}] (each file's range of
//                                               the flat space), "parameters": [{"name",
//                                               "offset", "numel"}]}
//
// Stage 3 pads each parameter on its own (train/zero3_params.h), so a shard is no range of one
// flat space: its index says "layout": "per_parameter", gives each shard the element range of
// every parameter it holds ("shards": [{"file", "rank", "parameters": [{"name", "begin",
// "end"}]}]) and each parameter's "numel", "padded", "shard" and "offset" (in a rank's shards);
// the padding's state is "zero.padding.<param name>.<state>".
//
// Loading re-cuts: every state tensor of this run's optimizer (a rank's pieces, or whole
// parameters at stage 0) is filled from whichever saved files hold its elements, so a checkpoint
// resumes on the same number of ranks, on another, or at another stage, and a stage-0 checkpoint
// (one optimizer.safetensors of whole tensors) resumes at stage 1 or 2. Only elementwise state
// re-cuts (its tensors have their parameter's elements: what the ZeRO stages accept); the
// extra_state of every saved file is merged (objects by key). The padding's state is zero, as
// its gradient always is.
#pragma once

#include <string>
#include <vector>

#include "dist/communicator.h"
#include "optim/optimizer.h"
#include "train/zero_optimizer.h"

namespace snug {

inline constexpr const char* kZeroIndexFile = "optimizer.index.json";

// "optimizer.rank-00000-of-00002.safetensors".
std::string zero_shard_file_name(int rank, int world);

// Rank `rank`'s shard of `z` into folder `dir`; returns its file name.
std::string write_zero_shard(const std::string& dir, ZeroOptimizer& z, int rank, int world);
// The index into `dir` (rank 0); returns its name followed by every shard's file name.
std::vector<std::string> write_zero_index(const std::string& dir, const ZeroOptimizer& z,
                                          int world);

// Fills `optimizer`'s state (allocating it as state_tensors() does) from checkpoint folder `dir`
// (sharded or not; `files` its trainer_state.json record, each file read is verified), re-cut as
// above, and loads the merged extra_state. `z` is the run's ZeroOptimizer, or null when
// `optimizer` holds whole parameters (`params`).
void load_recut_optimizer_state(const std::string& dir, const nlohmann::json& files,
                                Optimizer& optimizer, const ZeroOptimizer* z,
                                const ParameterList& params);

// Whether checkpoint `files` (trainer_state.json's record) are sharded.
bool is_sharded_checkpoint(const nlohmann::json& files);

}  // namespace snug

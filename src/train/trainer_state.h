// trainer_state.json, the record a checkpoint resumes from (train/checkpoint.h for the folder
// layout), parsed and checked on its own: no model, optimizer or file access beyond the text,
// so that every reader of it (resume, export, the output-dir check) and the fuzz target
// (fuzz/trainer_state_fuzz.cpp) go through the same checks.
//
// The document: format_version 2; global_step; data {epoch, position}; seed; optimizer {name,
// steps, extra_state}; config (TrainingArguments::to_json()); run (train/run_record.h);
// checksum_algorithm "fnv1a64"; files {name: {size, fnv1a64}}; save_index (optional, an integer
// >= 1); and "state_fnv1a64", FNV-1a 64
// (16 hex digits) over the document without that field as nlohmann::json::dump() writes it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace snug {

inline constexpr const char* kTrainerStateFile = "trainer_state.json";
// Every parameter of a checkpoint (train/checkpoint.h), under its Hugging Face name.
inline constexpr const char* kCheckpointModelFile = "model.safetensors";
// The optimizer's state of a checkpoint (a ZeRO run's rank-0 shard file keeps this name too).
inline constexpr const char* kCheckpointOptimizerFile = "optimizer.safetensors";
inline constexpr int kTrainerStateFormatVersion = 2;  // 2: carries its own checksum

// What a resume restores (the Trainer's loop position and what the run was); save_checkpoint
// writes it, load_checkpoint returns it (train/checkpoint.h).
struct CheckpointState {
  int64_t step = 0;        // completed optimizer steps (global_step)
  int64_t data_epoch = 0;  // DataLoader::seek arguments after the last consumed batch
  int64_t data_position = 0;
  uint64_t seed = 0;
  std::string optimizer;
  nlohmann::json config;  // an object: TrainingArguments::to_json() of the run that saved it
  nlohmann::json run;     // an object: train/run_record.h, what the run is and started from
};

// The whole document: the resume's state and what only the checkpoint's readers check.
struct TrainerState : CheckpointState {
  int64_t optimizer_steps = 0;
  nlohmann::json optimizer_extra;  // Optimizer::extra_state(), checked by the optimizer
  nlohmann::json files;            // name -> {"size": int >= 0, "fnv1a64": 16 hex digits}
  // The order of the saves into an output dir: 1 + the highest save_index there at the moment of
  // the save (0: a checkpoint of an earlier snug, without one). A resume from the dir takes the
  // checkpoint saved last, which after a resume from an older step is not the highest step.
  int64_t save_index = 0;
};

// The document's own checksum ("state_fnv1a64"): FNV-1a 64, as 16 hex digits, over
// state.dump() with that field left out.
std::string trainer_state_checksum(const nlohmann::json& state);

// Parses `text`, the trainer_state.json at `path` (<checkpoint folder>/trainer_state.json), and
// checks, in this order: JSON (depth-limited, no duplicate keys), format_version, the checksum,
// every field's presence and type, and the values a resume uses: global_step >= 1 and equal to
// the folder's <step> when the folder is named checkpoint-<step>[.replaced], data.epoch and
// data.position >= 0, 0 <= optimizer.steps <= global_step, model.safetensors and
// optimizer.safetensors recorded in files. Throws snug::Error naming `path` and the field.
TrainerState parse_trainer_state(std::string_view text, const std::string& path);

// Reads and parses dir/trainer_state.json (a regular file of at most 64 MiB).
TrainerState read_trainer_state(const std::string& dir);

// "checkpoint-<N>" with N a non-negative decimal that fits int64: true and *step = N.
bool parse_checkpoint_name(const std::string& name, int64_t* step);

}  // namespace snug

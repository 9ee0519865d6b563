// Training checkpoints: save and exact resume (the Hugging Face Trainer's checkpoint-<step>
// folders, with snug's own file set).
//
// Layout of OUTPUT_DIR/checkpoint-<step>/:
//   model.safetensors      every parameter under its Hugging Face name (F32; BF16 under
//                          --bf16-full), metadata {"format": "pt"}
//   config.json            full fine-tunes only (no LoRA adapters, no quantized base): the
//                          model's config.json (models/hf_folder.h), so that the checkpoint is
//                          itself a model folder `from_pretrained` loads, as the Trainer's are
//   tokenizer.json, tokenizer_config.json, special_tokens_map.json, generation_config.json, ...
//                          full fine-tunes only: copied from the --model folder when it has
//                          them (models/hf_folder.h, hf_side_file_names)
//   quantized_base.safetensors  only with a quantized base (--load-in-8bit/--load-in-4bit): its
//                          codes and quantization state as the run held them
//                          (train/quantized_base_file.h), so a resume does not rebuild it from
//                          --init-from or the seed
//   optimizer.safetensors  every optimizer state tensor, "<param name>.<state>" (Optimizer::
//                          state_tensors(): fp32 as F32, bf16 as BF16, 8-bit codes as U8)
//   trainer_state.json     (train/trainer_state.h parses and checks it) step, data loader (epoch,
//   position) after the last consumed batch,
//                          seed (the only RNG state: data order depends on (seed, epoch), and
//                          --bf16-full's stochastic rounding draws counter-based bits from
//                          (seed, optimizer step, tensor, element)), optimizer name, steps and
//                          extra_state, the run's config, and for each of the other files
//                          (safetensors, config.json, tokenizer files) its size and FNV-1a
//                          64-bit checksum over all its bytes (offset
//                          basis 0xcbf29ce484222325, prime 0x100000001b3; catches flipped
//                          bytes and truncation, not deliberate tampering); and its own
//                          checksum, "state_fnv1a64": FNV-1a 64 over the document without that
//                          field as nlohmann::json::dump() writes it. Loading checks it, then
//                          the values: global_step >= 1 and equal to the folder's <step>,
//                          data.epoch/position >= 0 (position within an epoch: Trainer),
//                          0 <= optimizer.steps <= global_step.
//
// Atomicity: everything is written into checkpoint-<step>.tmp/ (each file itself written to a
// temporary name, fsynced and renamed), trainer_state.json last; then the folder is renamed to
// checkpoint-<step> and the parent fsynced. A crash during a save leaves at worst a *.tmp folder,
// which resume ignores, and the previous checkpoints intact. A checkpoint-<step> that already
// exists is renamed to checkpoint-<step>.replaced first and removed only after the new one is in
// place; killed in between, resume takes the .replaced one (still complete).
//
// Loading verifies every recorded file's size and checksum before reading any (config.json and
// the tokenizer files too, though a resume reads neither: a damaged one would make the folder a
// broken model for from_pretrained); a missing, truncated or corrupted file, or one whose tensors
// do not match the model/optimizer, is a snug::Error naming the file. Checkpoints written before
// config.json was added record no such files and resume as before.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/fnv1a.h"
#include "models/model.h"
#include "models/model_config.h"
#include "optim/optimizer.h"
#include "train/trainer_state.h"

namespace snug {

// CheckpointState (what save_checkpoint writes and load_checkpoint restores) is declared in
// train/trainer_state.h, as the part of the document a resume uses.

// Checks the size and FNV-1a 64 checksum of dir/name against `files`, trainer_state.json's
// "files" record; throws snug::Error naming the file when it is missing, truncated or corrupted.
void verify_checkpoint_file(const std::string& dir, const std::string& name,
                            const nlohmann::json& files);

// What makes a full fine-tune's checkpoint a Hugging Face model folder (see the layout above).
struct CheckpointModelFiles {
  nlohmann::json config;      // config.json's content; null: none written (LoRA, quantized)
  std::string source_folder;  // the --model folder whose tokenizer files are copied ("": none)
};
// The files for `model` resolved from `cfg` (models/model_config.h): config.json and the source
// folder for a full fine-tune, nothing for a run with LoRA adapters or a quantized base (its
// model.safetensors holds adapters, or lacks the quantized weights), nor for a model `cfg` does
// not describe (other shape or parameter count: a Trainer given a model built elsewhere).
CheckpointModelFiles checkpoint_model_files(const Model& model, const ModelConfig& cfg);

// How the optimizer's state goes to disk and comes back. Unset: optimizer.safetensors, every
// state tensor of the optimizer. ZeRO stages 1-2 set both (train/zero_checkpoint.h): a file per
// rank and an index, re-cut on load.
struct OptimizerStateFiles {
  // Writes the state into the folder being written (before trainer_state.json) and returns the
  // names of the files it wrote there, which trainer_state.json records with their checksums.
  std::function<std::vector<std::string>(const std::string& tmp_dir)> save;
  // Loads the state from checkpoint folder `dir`, whose trainer_state.json "files" record is
  // `files` (verify_checkpoint_file each file read), extra_state included (load_checkpoint then
  // sets only the optimizer's steps).
  std::function<void(const std::string& dir, const nlohmann::json& files)> load;
};

// Writes output_dir/checkpoint-<state.step> (replacing one of the same step) and returns its
// path. Meta-device models cannot be saved. With a `gatherer` (ZeRO stage 3's partitioned
// parameters) model.safetensors is written a parameter at a time: each non-quantized parameter
// of at least one element, in parameters() order, is gathered whole, checked finite, written
// and released, so the model is never whole on the device; every other rank calls
// follow_checkpoint_gathers at the same point, which takes part in the same gathers.
std::string save_checkpoint(const std::string& output_dir, const CheckpointState& state,
                            const Model& model, Optimizer& optimizer,
                            const CheckpointModelFiles& hf = {},
                            const OptimizerStateFiles& opt_files = {},
                            ParameterGatherer* gatherer = nullptr);

// What save_checkpoint with `gatherer` gathers, on a rank that does not write: the same
// parameters in the same order, each acquired and released.
void follow_checkpoint_gathers(const Model& model, ParameterGatherer& gatherer);

// The complete checkpoints of output folder `dir` (checkpoint-<N> holding trainer_state.json;
// checkpoint-<N>.replaced where checkpoint-<N> is missing), by N ascending. *.tmp folders and
// folders without trainer_state.json are left out. Empty if `dir` is not a folder.
std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir);

// `dir` is a checkpoint folder (holds trainer_state.json) or an output folder: then the last of
// list_checkpoints(dir). Throws if there is none.
std::string resolve_checkpoint(const std::string& dir);

// Verifies and loads checkpoint folder `dir` into `model` and `optimizer` (which must be the
// optimizer named in it, over the model's parameters). Returns the saved state.
CheckpointState load_checkpoint(const std::string& dir, Model& model, Optimizer& optimizer,
                                const OptimizerStateFiles& opt_files = {});

}  // namespace snug

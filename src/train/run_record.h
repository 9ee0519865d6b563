// What a run is and what it started from, recorded in every checkpoint (trainer_state.json
// "run") so that a resume can tell a continuation of the same run from a different one
// (docs/checkpoints.md):
//   model      --model as given, the resolved shape (n_layer, n_embd, n_head, vocab_size,
//              n_positions), parameter dtype (--bf16-full), LoRA (r, alpha, targets, rsLoRA),
//              --freeze
//   model_files  the content hash of the --model folder's config.json and generation_config.json
//              and of the tokenizer's files (tokenizer.json, tokenizer_config.json,
//              special_tokens_map.json; --tokenizer's, else the folder's): a config.json edited
//              (rms_norm_eps, rope_theta) or merges changed between save and resume is another run
//              (not compared with a checkpoint of an earlier snug, which has no such record);
//              and "weights", the folder's weight files, each shard as {name, size,
//              header_fnv1a64} (the FNV-1a 64 of its 8-byte header length and JSON header, not of
//              its data: a 7B folder's 14 GB are not read; a value changed inside the data with
//              the header the same is not seen), or null without weights. A resume names the
//              first shard whose size or header differs (not compared with a checkpoint written
//              before this record, which has no "weights")
//   data       source ("builtin", "dummy" or "file") and, for a file, its FNV-1a 64 content hash
//   seq_len
//   optimizer  --optim and every setting of its state (betas, epsilon, weight decay, momentum,
//              8-bit embeddings, Adafactor's relative step, GaLore's rank, gap and scale)
//   quantized base  its quantization (WeightQuantConfig::describe(), or null)
//   seed       (fixes the data order and every random draw)
//   started_from    --init-from's path (or the --model folder's) and its shards as in
//              model_files.weights, or null for the seeded initialization; a resumed run carries
//              the record of the run it continues (a checkpoint of an earlier snug keeps its
//              whole-file "fnv1a64" here)
// A resume refuses any difference in these fields (check_same_run); every other setting of the
// run's config may change, as the Hugging Face Trainer allows, and is reported (config_changes).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/training_args.h"

namespace snug {

// The record of a run with these arguments (hashes the --data and --init-from files).
nlohmann::json make_run_record(const TrainingArguments& args);

// Throws snug::Error when `current` is not the same run as `saved` (the record in
// `where`, a trainer_state.json): names the field, its flag and both values.
void check_same_run(const nlohmann::json& saved, const nlohmann::json& current,
                    const std::string& where);

// Whether two records describe the same run (check_same_run would not throw).
bool same_run(const nlohmann::json& a, const nlohmann::json& b);

// The settings that differ between a checkpoint's config (TrainingArguments::to_json()) and
// this run's, outside the run record: "learning_rate 0.0006 -> 0.001", in key order. Paths that
// differ on every resume (resume_from, init_from, report_json) are left out.
std::vector<std::string> config_changes(const nlohmann::json& saved_config,
                                        const nlohmann::json& current_config);

}  // namespace snug

// Batches for the heads that do not predict the next token (--task, models/model_config.h):
//   masked-lm                transformers' DataCollatorForLanguageModeling (mlm_probability
//                            0.15): each token is chosen with probability 0.15; a chosen token's
//                            target is its id (every other target -100) and its input becomes
//                            the mask id with probability 0.8, a random id in [0, vocab) with
//                            0.1, and stays itself with 0.1;
//   sequence-classification  one label per row in column 0 of the targets, -100 elsewhere
//                            (models/model.h, "Tasks").
// Every draw is counter-based (core/random.h's splitmix64 of the key and the position), so a run
// is deterministic for its seed and a resumed run draws what the uninterrupted one did.
#pragma once

#include <cstdint>

#include "data/batches.h"

namespace snug {

inline constexpr double kMlmProbability = 0.15;

// inputs (n) are masked in place; targets (n) are overwritten. mask_id in [0, vocab).
// `offset`: element 0 is element `offset` of the keyed stream (a data-parallel rank's rows of a
// larger batch draw what one process draws for them).
void mask_tokens(int32_t* inputs, int32_t* targets, int64_t n, int64_t vocab, int32_t mask_id,
                 uint64_t key, int64_t offset = 0);
// The key of micro-batch `micro` of optimizer step `step` of a run seeded `seed`.
uint64_t collator_key(uint64_t seed, int64_t step, int64_t micro);

// --data dummy's label of window (sample) `window`: uniform in [0, num_labels) from (seed,
// window), as the seeds' dummy dataset draws random labels; a sample keeps its label across
// epochs and resumes.
int32_t dummy_label(uint64_t seed, int64_t window, int64_t num_labels);
// The label of row `row` of the evaluation data (--eval-split of --data dummy, or --eval-data
// dummy), its windows read in order: drawn as dummy_label, from a key of its own, so the
// evaluation's labels are independent of the training samples'.
int32_t dummy_eval_label(uint64_t seed, int64_t row, int64_t num_labels);
// The masked-lm collator's key for the evaluation batch starting at row `first_row`: the same
// masks at every evaluation of a run (its eval_loss moves with the model only), apart from
// training's.
uint64_t eval_collator_key(uint64_t seed, int64_t first_row);
// targets (B,T): label[b] at column 0 of row b, -100 elsewhere.
void row_labels(int32_t* targets, const int32_t* labels, int64_t B, int64_t T);
// The B training rows that start at (epoch, position) of `source` (a token stream's loader,
// --data dummy) labelled by row_labels: row b's label is dummy_label of the sample it reads,
// source.sample_at(epoch, position + b).
void dummy_row_labels(int32_t* targets, const BatchSource& source, uint64_t seed, int64_t epoch,
                      int64_t position, int64_t B, int64_t T, int64_t num_labels);

}  // namespace snug

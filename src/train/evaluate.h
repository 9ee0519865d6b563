// Evaluation: the Hugging Face Trainer's evaluation loop (eval_loss, perplexity, and accuracy for
// sequence classification) over every row of the evaluation data once, in order, without
// gradients. The Trainer runs it every --eval-steps and at the end (train/trainer.h).
//
// Distributed (EvalOptions::comm with several ranks): the batches of B rows one process would
// evaluate are dealt round-robin, batch b to rank b mod N; each rank adds up its batches'
// row-weighted losses (a double) and its counts (rows with targets, correct and labelled rows:
// int64), and one all-reduce of each gives every rank the one-process figures. Whole batches,
// not rows, are dealt because eval_loss is a mean of batch means: a batch cut across ranks would
// be two other means. The sums' float order differs from one process's (rank 0's batches, then
// rank 1's), nothing else.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "data/batches.h"
#include "dist/communicator.h"
#include "models/model.h"

namespace snug {

struct EvalLog {
  int64_t step;       // optimizer steps completed when it ran
  double eval_loss;   // as the Trainer's evaluation loop: the mean of the batches' mean token
                      // losses, each batch weighted by its rows
  double perplexity;  // exp(eval_loss), as transformers' run_clm reports it
  int64_t samples;    // rows evaluated
  // Sequence classification only: the share of rows whose most likely label is their label,
  // what the Trainer logs as eval_accuracy when compute_metrics returns "accuracy" (argmax of
  // the logits against the labels, over every row evaluated).
  std::optional<double> accuracy;
};

// What evaluate() does beyond a causal LM's next-token loss (the Trainer sets it per --task).
struct EvalOptions {
  // Called on each batch before its forward: rows x cols inputs and targets as the data gave
  // them (targets: the next tokens), `first_row` the index of the batch's first row in the
  // evaluation order. Masked-lm masks the inputs, sequence classification puts the labels in
  // (data/collator.h). Empty: the batch as it is.
  std::function<void(int32_t* inputs, int32_t* targets, int64_t rows, int64_t cols,
                     int64_t first_row)>
      prepare;
  // Dry runs on meta: a batch of a shape already evaluated is skipped (its forward starts from
  // the same memory, so it allocates what that one did).
  bool skip_repeated_shapes = false;
  // Count the rows whose most likely label (the argmax of the model's (rows, labels) output,
  // the first on a tie) is the label in column 0 of their targets: EvalLog::accuracy.
  bool accuracy = false;
  // The ranks the evaluation is shared among (see the top); null: this process evaluates all.
  dist::Communicator* comm = nullptr;
  // Every rank runs the same number of forwards (ZeRO stage 3, whose forwards gather each block
  // from every rank: collectives that must pair up): a rank dealt one batch fewer than rank 0
  // ends with a blank forward, one row of one token without a target, which gathers the blocks
  // as a batch does and counts in no figure.
  bool same_forwards = false;
};

// eval_loss of `data` (every row once, in order, batches of B): the mean of the batches' mean
// token losses weighted by their rows (batches without any target are left out). No gradients.
EvalLog evaluate(Model& model, const TrainData& data, int64_t B, int64_t T, uint64_t seed,
                 const EvalOptions& options = {});

}  // namespace snug

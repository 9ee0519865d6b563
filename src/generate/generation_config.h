// What `snug generate` does with a model's next-token logits, in transformers' GenerationConfig
// names and defaults (a user's generate() call means the same here):
//   greedy        do_sample false, num_beams 1: argmax after the logits processors
//   sampling      do_sample true: temperature, then top_k, then top_p, then a draw
//   beam search   num_beams > 1 (not sampled): transformers' beam search, length_penalty and
//                 early_stopping as there (generate/generate.h)
// repetition_penalty applies in every mode (CTRL's: a seen token's logit divided by the penalty
// when positive, multiplied when negative).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace snug {

enum class EarlyStopping { heuristic, always, never };  // false, true, "never"

struct GenerationConfig {
  int64_t max_new_tokens = 64;
  bool do_sample = false;
  double temperature = 1.0;
  int64_t top_k = 50;  // 0: off
  double top_p = 1.0;  // 1: off
  double repetition_penalty = 1.0;
  int64_t num_beams = 1;
  double length_penalty = 1.0;
  EarlyStopping early_stopping = EarlyStopping::heuristic;
  std::vector<int32_t> eos_token_ids;  // any of them ends a sequence (kept in the output)
  int32_t pad_token_id = -1;           // -1: eos_token_ids[0]
  uint64_t seed = 42;                  // sampling's draws

  // Throws snug::Error naming the flag of the first bad value.
  void validate() const;
};

}  // namespace snug

// The logits processors of generation (generate/generation_config.h), host-side on one row of V
// fp32 scores, each as transformers' processor of the same name computes it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace snug {

// CTRL's repetition penalty: for each distinct token in `seen`, its score s becomes s / penalty
// if s > 0, else s * penalty (RepetitionPenaltyLogitsProcessor).
void apply_repetition_penalty(std::span<float> scores, std::span<const int32_t> seen,
                              double penalty);
// scores / temperature.
void apply_temperature(std::span<float> scores, double temperature);
// Every score below the k-th largest becomes -inf (TopKLogitsWarper; k >= V: unchanged).
void apply_top_k(std::span<float> scores, int64_t k);
// Nucleus: sort ascending, drop the tokens whose cumulative probability is <= 1 - top_p, never
// the most likely one (TopPLogitsWarper).
void apply_top_p(std::span<float> scores, double top_p);
// log_softmax in place (double accumulation).
void log_softmax(std::span<float> scores);
// The first index of the largest score (torch.argmax's tie rule).
int32_t argmax(std::span<const float> scores);
// A draw from softmax(scores) given u uniform in [0, 1).
int32_t sample_from(std::span<const float> scores, double u);

}  // namespace snug

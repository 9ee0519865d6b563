// Text generation with a KV cache (nn/kv_cache.h) on any CausalLM that has forward_cached():
// greedy, sampling and beam search as transformers' generate() does them (generation_config.h),
// one prompt at a time.
//
// The cache is allocated once, for prompt + max_new_tokens positions (beam search: one row per
// beam), under category kv_cache; the prompt is one forward (the prefill), every new token one
// forward of one row per sequence. On the meta device (plan --inference) the same allocations
// happen with no values: every step "picks" token 0 and never stops early, so the dry run's peak
// is that of a generation running to max_new_tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "generate/generation_config.h"
#include "models/causal_lm.h"

namespace snug {

struct GenerationResult {
  std::vector<int32_t> tokens;  // the new tokens (an eos that ended the sequence included)
  bool stopped_at_eos = false;
  int64_t kv_cache_bytes = 0;  // the cache's size (seed 004's formula)
  int64_t forwards = 0;        // model forwards (prefill included)
};

// Generates after `prompt` (non-empty). `on_token` (greedy and sampling only) sees each new
// token as it is chosen, for streaming; beam search reports the winner at the end.
GenerationResult generate(CausalLM& model, const std::vector<int32_t>& prompt,
                          const GenerationConfig& cfg,
                          const std::function<void(int32_t)>& on_token = {});

}  // namespace snug

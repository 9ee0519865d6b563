// Text generation with a KV cache (nn/kv_cache.h) on any Model that has forward_cached():
// greedy, sampling and beam search as transformers' generate() does them (generation_config.h),
// for a batch of B prompts of one length (no padding masks yet); a single prompt is B = 1.
//
// The cache is allocated once, for prompt + max_new_tokens positions and one row per sequence
// (beam search: B x num_beams rows, prompt b's beams at rows [b K, (b+1) K)), under category
// kv_cache; the prompts are one forward (the prefill), every new token one forward of one row
// per sequence. A batch runs as transformers runs it: a sequence that reached eos gets the pad
// token while the others go on (greedy/sampling), beam search stops when no prompt can still
// improve. Under --bf16/--fp16 the model keeps its 16-bit compute copies of the GEMM weights
// from the prefill to the end of the generation (models/decoder_lm.h).
//
// On the meta device (plan --inference) the same allocations happen with no values: every step
// "picks" token 0 and no eos ever stops a sequence, so the dry run's peak is that of a
// generation running to max_new_tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "generate/generation_config.h"
#include "models/model.h"

namespace snug {

struct GeneratedSequence {
  std::vector<int32_t> tokens;  // the new tokens (an eos that ended the sequence included)
  bool stopped_at_eos = false;
};

struct BatchGenerationResult {
  std::vector<GeneratedSequence> sequences;  // one per prompt, in order
  int64_t kv_cache_bytes = 0;                // the cache's size (seed 004's formula)
  int64_t forwards = 0;                      // model forwards (prefill included)
};

// Generates after each of `prompts` (non-empty, all of one length). `on_token(prompt, token)`
// (greedy and sampling only) sees each new token as it is chosen, for streaming; beam search
// reports each prompt's winner at the end. Sampling draws are keyed by (seed, step x B + row).
BatchGenerationResult generate_batch(Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                     const GenerationConfig& cfg,
                                     const std::function<void(int64_t, int32_t)>& on_token = {});

struct GenerationResult {
  std::vector<int32_t> tokens;  // the new tokens (an eos that ended the sequence included)
  bool stopped_at_eos = false;
  int64_t kv_cache_bytes = 0;  // the cache's size (seed 004's formula)
  int64_t forwards = 0;        // model forwards (prefill included)
};

// One prompt: generate_batch with B = 1.
GenerationResult generate(Model& model, const std::vector<int32_t>& prompt,
                          const GenerationConfig& cfg,
                          const std::function<void(int32_t)>& on_token = {});

}  // namespace snug

#include "generate/generation_config.h"

#include "core/error.h"

namespace snug {

void GenerationConfig::validate() const {
  SNUG_CHECK(max_new_tokens >= 1, "--max-new-tokens must be >= 1, got ", max_new_tokens);
  SNUG_CHECK(temperature > 0, "--temperature must be > 0, got ", temperature);
  SNUG_CHECK(top_k >= 0, "--top-k must be >= 0, got ", top_k);
  SNUG_CHECK(top_p > 0 && top_p <= 1, "--top-p must be in (0, 1], got ", top_p);
  SNUG_CHECK(repetition_penalty > 0, "--repetition-penalty must be > 0, got ", repetition_penalty);
  SNUG_CHECK(num_beams >= 1, "--num-beams must be >= 1, got ", num_beams);
  SNUG_CHECK(!(do_sample && num_beams > 1),
             "--do-sample with --num-beams > 1 (beam sampling) is not supported");
}

}  // namespace snug

#include "support/block_decoder.h"

#include "nn/init.h"
#include "nn/param_fill.h"

namespace snug::test {

DecoderLMSpec decoder_spec(const BlockLMSpec& b, const std::string& name, int64_t max_positions) {
  DecoderLMSpec s;
  s.name = name;
  s.vocab = b.vocab;
  s.hidden = b.hidden;
  s.layers = b.layers;
  s.max_positions = max_positions;
  s.embed_name = b.embed_name;
  s.layer_prefix = b.layer_prefix;
  s.layer = b.layer;
  s.final_norm_name = b.final_norm_name;
  s.head_name = b.head_name;
  return s;
}

void BlockDecoderLM::init_weights(uint64_t seed) {
  NormalGenerator rng(seed);
  for (Parameter* p : parameters())
    nn::fill_values(*p, device().ops(), [&](float* d, int64_t n) { rng.fill(d, n, 0.0f, 0.3f); });
}

}  // namespace snug::test

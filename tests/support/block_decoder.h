// A DecoderLM (models/decoder_lm.h) of a test::BlockLMSpec's blocks (support/block_lm.h): the
// model interface, generation and training on compositions no family preset has.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "models/decoder_lm.h"
#include "support/block_lm.h"

namespace snug::test {

// The DecoderLMSpec of `b`'s sizes, names and layer, named `name`, for sequences of at most
// `max_positions`.
DecoderLMSpec decoder_spec(const BlockLMSpec& b, const std::string& name, int64_t max_positions);

// A DecoderLM of `spec` with the summary given, whose init_weights draws every parameter from
// N(0, 0.3) in order, from one generator seeded with the seed.
class BlockDecoderLM final : public DecoderLM {
 public:
  BlockDecoderLM(const DecoderLMSpec& s, Device& dev, const ModelSummary& described = {})
      : DecoderLM(s, dev), summary_(described) {}
  ModelSummary summary() const override { return summary_; }
  std::map<std::string, std::string> weights_metadata() const override { return {}; }
  void init_weights(uint64_t seed) override;

 private:
  ModelSummary summary_;
};

}  // namespace snug::test

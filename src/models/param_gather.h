// ZeRO stage 3's seam in the models (issue 30; train/zero3_params.h, docs/distributed.md): a
// model whose trainable parameters are partitioned across ranks asks for a block's parameters
// whole just before it runs the block (forward, backward, a recomputed forward) and gives them
// back just after. The blocks are the embeddings, each layer (its LoRA adapters included) and
// the head (the final norm and the head weight, the tied embedding weight where the head is
// tied). The gatherer counts the requests per parameter: a parameter asked for twice (a tied
// weight, a layer recomputed inside its own backward) is gathered once and released when the
// last request is given back. Parameters the gatherer does not manage (frozen, quantized) are
// whole already and pass through.
#pragma once

#include <vector>

#include "nn/parameter.h"

namespace snug {

class ParameterGatherer {
 public:
  virtual ~ParameterGatherer() = default;
  // p's value is whole (gathered if it was not) until the matching release().
  virtual void acquire(Parameter& p) = 0;
  // A block's parameters at once, as acquire() of each in order (the gatherer may gather them in
  // one collective).
  virtual void acquire(const std::vector<Parameter*>& ps) {
    for (Parameter* p : ps) acquire(*p);
  }
  // The matching release: the last one drops the gathered value.
  virtual void release(Parameter& p) = 0;
};

}  // namespace snug

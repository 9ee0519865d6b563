// Embedding block: out (B,T,C) = weight[tokens] (+ positions[t] with learned positions, GPT-2's
// wpe). Parameters: <name> (V, C) and, when max_positions > 0, <positions_name> (P, C).
// No padding_idx (a row with a frozen zero gradient) yet: a later step (docs/design.md).
//
// Saved: `tokens` (B,T) int32, the ids the weight gradient scatters into (category input_data,
// made by the model from the host batch).
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "nn/parameter_store.h"

namespace snug::nn {

class Embedding {
 public:
  struct Saved {
    Tensor tokens;  // (B,T) int32
  };

  Embedding(ParameterStore& ps, const std::string& name, int64_t vocab, int64_t dim,
            const std::string& positions_name = "", int64_t max_positions = 0);

  // out (B,T,C); tokens (B,T) int32 with ids in [0, V) (the model checks the host batch). Row t
  // is position first_position + t (generation continues after the KV cache's rows).
  void forward(const Tensor& tokens, const Tensor& out, Saved& s, int64_t first_position = 0) const;
  // Accumulates the weight (and position) gradients from dout (B,T,C). Releases s.
  void backward(const Tensor& dout, Saved& s) const;

  Parameter* weight() const { return w_; }
  Parameter* positions() const { return pos_; }
  int64_t max_positions() const { return max_pos_; }

 private:
  RunContext* ctx_;
  int64_t dim_, max_pos_;
  Parameter* w_;
  Parameter* pos_ = nullptr;
};

}  // namespace snug::nn

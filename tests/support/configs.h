// Model configs shared by tests.
#pragma once

#include "models/gpt2/gpt2_config.h"

namespace snug::test {

// Small, with every dimension odd or uneven (vocab 301, 40 positions, C 48 over 6 heads,
// 3 layers): shape bugs that round sizes hide show up here.
inline GPT2Config odd_config() {
  GPT2Config c;
  c.name = "odd";
  c.vocab_size = 301;
  c.n_positions = 40;
  c.n_embd = 48;
  c.n_layer = 3;
  c.n_head = 6;
  return c;
}

}  // namespace snug::test

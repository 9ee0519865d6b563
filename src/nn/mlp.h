// MLP block, the two shapes the families use:
//   plain  out = down(act(up(x)))                 act = GELU tanh (GPT-2) or exact erf (NeoX, BERT)
//   gated  out = down(silu(gate(x)) * up(x))      SwiGLU (Llama, Mistral, Qwen2)
// Module names under the prefix: up (GPT-2: c_fc), down (c_proj), gate (gated only); parameters
// are registered gate, up, down (HF's order for gated MLPs) or up, down.
//
// Saved, for N = B*T rows and I = intermediate size:
//   x     (N,C)  the input (in the up/gate Linear Saveds, one shared tensor)
//   pre   (N,I)  up(x): the activation's input (plain) or the gated product's second factor
//   gate  (N,I)  gate(x) (gated only)
//   h     (N,I)  the activation's output, down's input (in the down Linear Saved)
// Later steps (docs/design.md): hidden dropout after down.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/tensor.h"
#include "nn/linear.h"
#include "nn/parameter_store.h"

namespace snug::nn {

enum class Activation { gelu_tanh, gelu_erf, silu_gated };

struct MLPConfig {
  int64_t hidden = 0;
  int64_t intermediate = 0;
  Activation act = Activation::silu_gated;
  bool bias = false;
  LinearLayout layout = LinearLayout::linear;
  std::string up_name = "up_proj", gate_name = "gate_proj", down_name = "down_proj";
};

class MLP {
 public:
  struct Saved {
    Linear::Saved up_lin, gate_lin, down_lin;
    Tensor pre, gate;
  };

  MLP(ParameterStore& ps, const std::string& prefix, const MLPConfig& cfg);

  // out (B,T,C) from x (B,T,C); out is the caller's.
  void forward(const Tensor& x, const Tensor& out, Saved& s) const;
  // dx (B,T,C) = d/dx (overwrite); parameter gradients accumulate. Releases s.
  void backward(const Tensor& dout, Saved& s, const Tensor& dx) const;

 private:
  bool gated() const { return cfg_.act == Activation::silu_gated; }

  Device* dev_;
  MLPConfig cfg_;
  std::optional<Linear> gate_, up_, down_;
};

}  // namespace snug::nn

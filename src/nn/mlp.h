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
#include <vector>

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
  // Returns dx (B,T,C) = d/dx (temporary); parameter gradients accumulate. Releases s. Under
  // mixed precision dout is the residual stream's fp32 gradient (rounded here for down's GEMM)
  // and dx comes back rounded.
  Tensor backward(const Tensor& dout, Saved& s) const;

  // Mixed precision (nn/run_context.h): the 16-bit saved tensors to and from fp32.
  void compact(Saved& s) const;
  void widen(Saved& s) const;
  // Selective checkpointing: drop the activation's output (down's input) and rebuild it from
  // the kept pre-activation (after widen()).
  void drop_selective(Saved& s) const { s.down_lin.in.reset(); }
  // The block's input (the up/gate projections' saved input): dropped and set again when the
  // layer recomputes it (selective checkpointing of the norm before the block).
  void drop_input(Saved& s) const { s.up_lin.in = s.gate_lin.in = Tensor(); }
  void set_input(Saved& s, const Tensor& x) const {
    s.up_lin.in = x;
    if (gated()) s.gate_lin.in = x;
  }
  void recompute(Saved& s) const;
  // The block's Linears in registration order (LoRA targets).
  std::vector<Linear*> linears();

 private:
  bool gated() const { return cfg_.act == Activation::silu_gated; }
  // h = act(pre) (or silu(gate) * pre), rounded as a GEMM input.
  void activate(const Tensor& h, const Saved& s) const;

  RunContext* ctx_;
  MLPConfig cfg_;
  std::optional<Linear> gate_, up_, down_;
};

}  // namespace snug::nn

// GPT-2 (OpenAI's decoder-only transformer, Hugging Face GPT2LMHeadModel layout) as a composition
// of src/nn blocks (models/decoder_lm.h): learned positions, pre-LayerNorm layers with a fused
// [q|k|v] Conv1D projection and GELU (tanh) MLP, all with biases, and the LM head tied to
// transformer.wte.weight.
//
// What is GPT-2's own here: the spec (names, layout, sizes from GPT2Config), the initialization
// of Hugging Face's _init_weights, the weights metadata and summary. Everything a run does
// (precision, checkpointing, LoRA, quantized base, hooks) is DecoderLM's, for every family.
//
// Parameter names are the Hugging Face state_dict keys of GPT2LMHeadModel
// ("transformer.h.0.attn.c_attn.weight", ...). Linear weights use HF's Conv1D layout (in, out).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "core/device.h"
#include "models/decoder_lm.h"
#include "models/gpt2/gpt2_config.h"
#include "quant/weight_quant.h"

namespace snug {

// GPT-2's DecoderLMSpec for a config (validated).
DecoderLMSpec gpt2_spec(const GPT2Config& cfg);
// The same of a resolved gpt2 ModelConfig.
DecoderLMSpec gpt2_spec(const ModelConfig& cfg);

class GPT2 final : public DecoderLM {
 public:
  GPT2(const GPT2Config& cfg, Device& dev, DType param_dtype = DType::f32,
       const std::optional<WeightQuantConfig>& quant = std::nullopt);
  // The same from a resolved gpt2 ModelConfig (models/registry.h).
  GPT2(const ModelConfig& cfg, Device& dev, DType param_dtype = DType::f32,
       const std::optional<WeightQuantConfig>& quant = std::nullopt)
      : GPT2(gpt2_config(cfg), dev, param_dtype, quant) {}

  const GPT2Config& config() const { return cfg_; }
  ModelSummary summary() const override;
  // gpt2_weights_metadata(config()) (models/gpt2/gpt2_weights.h).
  std::map<std::string, std::string> weights_metadata() const override;

  // GPT-2's initialization as in Hugging Face (_init_weights): normal(0, 0.02) for embeddings and
  // linear weights, c_proj weights scaled by 1/sqrt(2 * n_layer), biases 0, LayerNorm 1/0.
  // Deterministic for a seed on every platform. bf16 parameters get these values rounded,
  // quantized ones these values quantized. Values exist only on a real device: callers skip it
  // on meta (a dry run has nothing to initialize).
  void init_weights(uint64_t seed) override;

 private:
  GPT2Config cfg_;
};

}  // namespace snug

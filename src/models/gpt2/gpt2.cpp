#include "models/gpt2/gpt2.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/init.h"
#include "nn/param_fill.h"

namespace snug {

DecoderLMSpec gpt2_spec(const GPT2Config& config) {
  GPT2Config c = config;
  c.validate();
  // One GPT-2 layer: ln_1, attn (fused Conv1D c_attn [q|k|v] and c_proj, biases), ln_2,
  // mlp (c_fc, GELU tanh, c_proj), in GPT2Block's parameter order.
  nn::DecoderLayerConfig layer{.norm = nn::NormKind::layer,
                               .norm_eps = c.layer_norm_epsilon,
                               .parallel_residual = false,
                               .attn = {.hidden = c.n_embd,
                                        .num_heads = c.n_head,
                                        .qkv_bias = true,
                                        .o_bias = true,
                                        .layout = nn::LinearLayout::conv1d,
                                        .o_name = "c_proj",
                                        .fused_qkv_name = "c_attn"},
                               .mlp = {.hidden = c.n_embd,
                                       .intermediate = 4 * c.n_embd,
                                       .act = nn::Activation::gelu_tanh,
                                       .bias = true,
                                       .layout = nn::LinearLayout::conv1d,
                                       .up_name = "c_fc",
                                       .down_name = "c_proj"},
                               .order = nn::LayerParamOrder::interleaved,
                               .norm1_name = "ln_1",
                               .norm2_name = "ln_2",
                               .attn_name = "attn",
                               .mlp_name = "mlp"};
  return {.name = c.name,
          .vocab = c.vocab_size,
          .hidden = c.n_embd,
          .layers = c.n_layer,
          .max_positions = c.n_positions,
          .max_positions_key = "n_positions",
          .embed_name = "transformer.wte.weight",
          .positions_name = "transformer.wpe.weight",
          .layer_prefix = "transformer.h.",
          .layer = layer,
          .final_norm_name = "transformer.ln_f",
          .tie_word_embeddings = true};
}

DecoderLMSpec gpt2_spec(const ModelConfig& cfg) {
  return gpt2_spec(gpt2_config(cfg));
}

GPT2::GPT2(const GPT2Config& cfg, Device& dev, DType param_dtype,
           const std::optional<WeightQuantConfig>& quant)
    : DecoderLM(gpt2_spec(cfg), dev, param_dtype, quant), cfg_(cfg) {
  SNUG_ASSERT(count_params(parameters()) == cfg_.num_params());
}

ModelSummary GPT2::summary() const {
  return gpt2_model_config(cfg_).shape;
}

void GPT2::init_weights(uint64_t seed) {
  const float proj_std = 0.02f / std::sqrt(2.0f * static_cast<float>(cfg_.n_layer));
  // One normal stream over the weights in parameter order, each parameter from its offset
  // (NormalGenerator::at): chunks fill in parallel with the serial values.
  int64_t offset = 0;
  for (Parameter* p : parameters()) {
    const std::string& n = p->name;
    const bool bias = n.ends_with(".bias"), norm = n.find(".ln_") != std::string::npos;
    const float std = n.ends_with("c_proj.weight") ? proj_std : 0.02f;
    const int64_t base = offset;
    nn::fill_values_indexed(*p, [&](float* d, int64_t begin, int64_t cnt) {
      if (bias || norm)
        std::fill(d, d + cnt, bias ? 0.0f : 1.0f);
      else
        NormalGenerator::at(seed, base + begin).fill(d, cnt, 0.0f, std);
    });
    if (!bias && !norm) offset += p->numel();
  }
}

}  // namespace snug

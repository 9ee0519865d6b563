// GPT-NeoX (GPTNeoXForCausalLM) as a DecoderLM (models/decoder_lm.h): embed_in, L layers of
//   parallel    out = x + dense(attn(qkv(ln1(x)))) + mlp(ln2(x))       (use_parallel_residual)
//   sequential  h = x + dense(attn(qkv(ln1(x))));  out = h + mlp(ln2(h))
// with biased LayerNorms, the fused per-head interleaved query_key_value projection (per head
// h: [q_h | k_h | v_h]), rotary on the first rotary_pct of each head, a GELU MLP
// (dense_h_to_4h, dense_4h_to_h), the final LayerNorm and the untied embed_out head. Parameter
// names and order are Hugging Face's named_parameters(): gpt_neox.embed_in.weight,
// gpt_neox.layers.{i}.input_layernorm, .post_attention_layernorm, .attention.query_key_value,
// .attention.dense, .mlp.dense_h_to_4h, .mlp.dense_4h_to_h, gpt_neox.final_layer_norm,
// embed_out.weight. Weights as nn.Linear's (out, in).
//
// The model is its spec: SpecDecoderLM (models/family.h) gives it the resolved config.json as
// weights metadata and transformers' _init_weights (normal(0, initializer_range) for Linear and
// Embedding weights, embed_out too; zero biases; LayerNorm weight 1 and bias 0).
#pragma once

#include "models/decoder_lm.h"
#include "models/model_config.h"

namespace snug {

// The spec of a resolved gpt_neox ModelConfig.
DecoderLMSpec gpt_neox_spec(const ModelConfig& cfg);

}  // namespace snug

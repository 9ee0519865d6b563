// The Llama-shaped causal LMs (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM) as a
// DecoderLM (models/decoder_lm.h): token embeddings, L layers of
//   h = x + o_proj(attn(rope(q_proj(rms1(x))), rope(k_proj(..)), v_proj(..)))   GQA
//   out = h + down_proj(silu(gate_proj(rms2(h))) * up_proj(rms2(h)))
// a final RMSNorm and lm_head (or the embedding, tied). Mistral's sliding_window W limits each
// query to the W latest keys, itself included (nn/attention.h). Parameter names and order are
// Hugging Face's named_parameters(): model.embed_tokens.weight,
// model.layers.{i}.self_attn.{q,k,v,o}_proj
// (.weight, .bias where the config has them), .mlp.{gate,up,down}_proj, .input_layernorm,
// .post_attention_layernorm, model.norm.weight, lm_head.weight (absent when tied). Linear weights
// are nn.Linear's (out, in).
//
// The model is its spec: SpecDecoderLM (models/family.h) gives it the resolved config.json as
// weights metadata and transformers' _init_weights (normal(0, initializer_range) for every Linear
// and Embedding weight, lm_head too when untied; zero biases; RMSNorm weights 1).
#pragma once

#include "models/decoder_lm.h"
#include "models/model_config.h"

namespace snug {

// The spec of a resolved llama, mistral or qwen2 ModelConfig.
DecoderLMSpec llama_spec(const ModelConfig& cfg);

}  // namespace snug

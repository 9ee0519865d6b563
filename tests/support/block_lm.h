// A decoder-only LM composed from src/nn blocks alone (issue 16, acceptance 4): embedding, L
// pre-norm layers (RMSNorm or LayerNorm; GQA attention with rotary; gated or GELU MLP; sequential
// or parallel residual), final norm, chunked LM head (untied or tied) with cross-entropy. The
// parameter names are Hugging Face's Llama names (model.embed_tokens.weight,
// model.layers.0.self_attn.q_proj.weight, ..., model.norm.weight, lm_head.weight): a family is a
// configuration of these blocks, not a copy of a model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/decoder_layer.h"
#include "nn/embedding.h"
#include "nn/lm_head_loss.h"
#include "nn/norm.h"
#include "nn/parameter_store.h"

namespace snug::test {

// The knobs of the Llama-style compositions the tests use; llama_style() turns them into a spec.
struct BlockLMConfig {
  int64_t vocab = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, intermediate = 0;
  int64_t rotary_dim = 0;  // 0: the whole head
  float rope_theta = 10000.0f;
  float norm_eps = 1e-6f;
  nn::NormKind norm = nn::NormKind::rms;
  nn::Activation act = nn::Activation::silu_gated;
  AttentionImpl kernel = AttentionImpl::flash;
  bool parallel_residual = false;
  bool tie_word_embeddings = false;
};

// Everything that makes a family: sizes, names, and the blocks' configuration.
struct BlockLMSpec {
  int64_t vocab = 0, hidden = 0, layers = 0;
  std::string embed_name = "model.embed_tokens.weight";
  std::string positions_name;  // learned positions (with max_positions > 0)
  int64_t max_positions = 0;
  std::string layer_prefix = "model.layers.";  // + layer index
  nn::DecoderLayerConfig layer;                // the final norm uses its norm kind and eps
  std::string final_norm_name = "model.norm";
  std::string head_name = "lm_head";
  bool tie_word_embeddings = false;
};

// HF Llama names and layout (nn.Linear weights, no biases, blocks-first parameter order).
BlockLMSpec llama_style(const BlockLMConfig& c);
// HF GPT-NeoX names and layout (gpt_neox.embed_in, norms-first layers with biased LayerNorms,
// attention.query_key_value fused per-head interleaved with bias, attention.dense, mlp.
// dense_h_to_4h / dense_4h_to_h with biases, gpt_neox.final_layer_norm, untied embed_out); the
// blocks' kinds (norm, activation, residual, rotary dims, kernel) come from c.
BlockLMSpec neox_style(const BlockLMConfig& c);

class BlockLM {
 public:
  BlockLM(const BlockLMSpec& spec, Device& dev);

  // tokens, targets: (B,T) host arrays (targets < 0 ignored). Returns the mean cross-entropy in
  // double (0 on meta). Keeps what backward needs when for_backward. position_ids (B,T), when
  // given: packed documents, each starting at position 0 (RunContext::position_ids).
  double forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                 bool for_backward, const int32_t* position_ids = nullptr);
  // Accumulates d(mean loss)/d(param) into every parameter's gradient; frees what forward kept.
  void backward();

  ParameterStore& params() { return ps_; }

 private:
  struct Saved {
    Tensor targets;
    nn::Embedding::Saved emb;
    std::vector<nn::DecoderLayer::Saved> layers;
    nn::NormSaved norm;
    nn::LMHeadLoss::Saved head;
  };

  BlockLMSpec spec_;
  Device* dev_;
  ParameterStore ps_;
  nn::Embedding embed_;
  std::vector<nn::DecoderLayer> layers_;
  nn::Norm norm_;
  nn::LMHeadLoss head_;
  Saved s_;
};

}  // namespace snug::test

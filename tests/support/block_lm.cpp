#include "support/block_lm.h"

#include <string>

#include "core/error.h"
#include "kernels/attention_dims.h"
#include "kernels/op_table.h"
#include "nn/block_util.h"

namespace snug::test {

BlockLMSpec llama_style(const BlockLMConfig& c) {
  BlockLMSpec s;
  s.vocab = c.vocab;
  s.hidden = c.hidden;
  s.layers = c.layers;
  s.tie_word_embeddings = c.tie_word_embeddings;
  nn::DecoderLayerConfig& l = s.layer;
  l.norm = c.norm;
  l.norm_eps = c.norm_eps;
  l.parallel_residual = c.parallel_residual;
  l.attn.hidden = c.hidden;
  l.attn.num_heads = c.heads;
  l.attn.num_kv_heads = c.kv_heads;
  l.attn.rotary_dim = c.rotary_dim > 0 ? c.rotary_dim : c.hidden / c.heads;
  l.attn.rope_theta = c.rope_theta;
  l.attn.kernel = c.kernel;
  l.mlp.hidden = c.hidden;
  l.mlp.intermediate = c.intermediate;
  l.mlp.act = c.act;
  return s;
}

BlockLMSpec neox_style(const BlockLMConfig& c) {
  BlockLMSpec s = llama_style(c);
  s.embed_name = "gpt_neox.embed_in.weight";
  s.layer_prefix = "gpt_neox.layers.";
  s.final_norm_name = "gpt_neox.final_layer_norm";
  s.head_name = "embed_out";
  nn::DecoderLayerConfig& l = s.layer;
  l.order = nn::LayerParamOrder::norms_first;
  l.attn_name = "attention";
  l.attn.fused_qkv_name = "query_key_value";
  l.attn.fused_qkv_layout = nn::FusedQKVLayout::per_head_interleaved;
  l.attn.o_name = "dense";
  l.attn.qkv_bias = l.attn.o_bias = true;
  l.mlp.bias = true;
  l.mlp.up_name = "dense_h_to_4h";
  l.mlp.down_name = "dense_4h_to_h";
  return s;
}

BlockLM::BlockLM(const BlockLMSpec& spec, Device& dev)
    : spec_(spec),
      dev_(&dev),
      ps_(dev),
      embed_(ps_, spec.embed_name, spec.vocab, spec.hidden, spec.positions_name,
             spec.max_positions),
      layers_([&] {
        std::vector<nn::DecoderLayer> v;
        for (int64_t l = 0; l < spec.layers; ++l)
          v.emplace_back(ps_, spec.layer_prefix + std::to_string(l), spec.layer);
        return v;
      }()),
      norm_(ps_, spec.final_norm_name, spec.hidden, spec.layer.norm, spec.layer.norm_eps),
      head_(ps_, spec.head_name, spec.hidden, spec.vocab,
            spec.tie_word_embeddings ? embed_.weight() : nullptr) {}

double BlockLM::forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                        bool for_backward, const int32_t* position_ids) {
  const int64_t N = B * T, V = spec_.vocab;
  for (int64_t i = 0; i < N; ++i) {
    SNUG_CHECK(tokens[i] >= 0 && tokens[i] < V, "token id ", tokens[i], " at ", i,
               " is outside the vocabulary [0, ", V, ")");
    SNUG_CHECK(targets[i] < V, "target id ", targets[i], " at ", i, " is outside the vocabulary");
  }
  s_ = {};
  Tensor tk = Tensor::empty({B, T}, DType::i32, Category::input_data, *dev_);
  s_.targets = Tensor::empty({B, T}, DType::i32, Category::input_data, *dev_);
  dev_->upload(tk.data<int32_t>(), tokens, N);
  dev_->upload(s_.targets.data<int32_t>(), targets, N);
  nn::RunContext& ctx = ps_.context();
  ctx.position_ids = Tensor();
  if (position_ids) {
    check_position_ids(position_ids, B, T, "position_ids");
    ctx.position_ids = Tensor::empty({B, T}, DType::i32, Category::input_data, *dev_);
    dev_->upload(ctx.position_ids.data<int32_t>(), position_ids, N);
  }

  Tensor x = nn::activation(*dev_, {B, T, spec_.hidden});
  embed_.forward(tk, x, s_.emb);
  tk.reset();  // the embedding's Saved keeps the ids
  s_.layers.resize(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) x = layers_[l].forward(x, s_.layers[l]);
  ctx.position_ids = Tensor();  // the layers that need them keep them
  const Tensor xf = nn::activation(*dev_, {B, T, spec_.hidden});
  norm_.forward(x, xf, s_.norm);
  x.reset();
  int64_t valid = 0;
  for (int64_t i = 0; i < N; ++i) valid += targets[i] >= 0 ? 1 : 0;
  const double loss =
      head_.forward(xf, s_.targets, valid, LogitsMode::chunked, for_backward, 1.0f, false, s_.head);
  if (!for_backward) s_ = {};
  return loss;
}

void BlockLM::backward() {
  SNUG_CHECK(s_.head.dx.defined(), "backward: needs a forward with for_backward");
  Tensor dxf = head_.backward(s_.head);
  Tensor dres = nn::temporary(*dev_, dxf.shape());
  dres.zero_();  // the norms accumulate into the residual stream's gradient
  norm_.backward(dxf, s_.norm, dres);
  dxf.reset();
  for (size_t l = layers_.size(); l-- > 0;) layers_[l].backward(dres, s_.layers[l]);
  embed_.backward(dres, s_.emb);
  s_ = {};
}

}  // namespace snug::test

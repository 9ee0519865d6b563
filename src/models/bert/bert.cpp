#include "models/bert/bert.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/random.h"
#include "kernels/op_table.h"
#include "nn/block_util.h"
#include "nn/init.h"
#include "nn/neftune.h"
#include "nn/param_fill.h"

namespace snug {

namespace {

// Dropout sites outside the layers (RunContext::dropout_key's layer numbers).
constexpr int64_t kEmbeddingsDropoutLayer = -1, kPoolerDropoutLayer = -2;

}  // namespace

struct Bert::Saved : SavedRun {
  nn::Embedding::Saved words, types;
  nn::NormSaved emb_norm;
  Tensor emb_mask;  // (B,T,C) uint8
  Tensor x0;        // (B,T,C) the embeddings' output, layer 0's input
  std::vector<nn::EncoderLayer::Saved> layers;
  std::vector<Tensor> outs;  // layer outputs kept as segment inputs (checkpointing) and the last
  // masked-lm
  nn::Linear::Saved transform_lin;
  Tensor pre;  // (B,T,C) the transform's output, GELU's input
  nn::NormSaved transform_norm;
  nn::LMHeadLoss::Saved head;
  // sequence classification
  nn::Linear::Saved pooler_lin, cls_lin;
  Tensor pooled;    // (B,C) tanh's output
  Tensor cls_mask;  // (B,C) uint8
  Tensor probs, losses, labels;
  int64_t valid = 0;
  float loss_scale = 1.0f;
};

Bert::Bert(const BertConfig& cfg, Device& dev, DType param_dtype,
           const std::optional<WeightQuantConfig>& quant)
    : BlockModel(dev, cfg.name, "bert.encoder.layer.", "layer.", AttentionImpl::flash,
                 LogitsMode::full),
      cfg_(cfg) {
  ParameterStore& ps = store();
  cfg_.validate();
  const int64_t V = cfg_.vocab_size, C = cfg_.hidden_size;
  dev.pool().set_phase("init weights");
  ps.set_param_dtype(param_dtype);
  words_.emplace(ps, "bert.embeddings.word_embeddings.weight", V, C,
                 "bert.embeddings.position_embeddings.weight", cfg_.max_position_embeddings);
  types_.emplace(ps, "bert.embeddings.token_type_embeddings.weight", cfg_.type_vocab_size, C);
  emb_norm_.emplace(ps, "bert.embeddings.LayerNorm", C, nn::NormKind::layer, cfg_.layer_norm_eps);
  ps.set_weight_quant(quant);  // the layers' Linear weights only
  layers_.reserve(static_cast<size_t>(cfg_.num_hidden_layers));
  for (int64_t l = 0; l < cfg_.num_hidden_layers; ++l) {
    nn::EncoderLayerConfig lc;
    lc.norm_eps = cfg_.layer_norm_eps;
    lc.attn = {.hidden = C,
               .num_heads = cfg_.num_attention_heads,
               .causal = false,
               .qkv_bias = true,
               .o_bias = true,
               .kernel = attention(),
               .layout = nn::LinearLayout::linear,
               .q_name = "self.query",
               .k_name = "self.key",
               .v_name = "self.value",
               .o_name = "output.dense",
               .fused_qkv_name = "",
               .fused_qkv_layout = nn::FusedQKVLayout::blocks,
               .probs_dropout = cfg_.attention_probs_dropout_prob,
               .dropout_layer = l};
    lc.mlp = {.hidden = C,
              .intermediate = cfg_.intermediate_size,
              .act = nn::Activation::gelu_erf,
              .bias = true,
              .layout = nn::LinearLayout::linear,
              .up_name = "intermediate.dense",
              .down_name = "output.dense"};
    lc.hidden_dropout = cfg_.hidden_dropout_prob;
    lc.index = l;
    const size_t begin = ps.list().size();
    layers_.emplace_back(ps, layer_prefix() + std::to_string(l), lc);
    add_layer(begin, ps.list().size(), layers_.back().linears());
  }
  ps.set_weight_quant(std::nullopt);
  head_params_begin_ = ps.list().size();
  if (classifies()) {
    pooler_.emplace(ps, "bert.pooler.dense", C, C, true, nn::LinearLayout::linear);
    classifier_.emplace(ps, "classifier", C, cfg_.num_labels, true, nn::LinearLayout::linear);
  } else {
    // BertLMPredictionHead registers its own bias before its submodules (HF's order).
    mlm_bias_ = ps.add("cls.predictions.bias", {V}, false);
    transform_.emplace(ps, "cls.predictions.transform.dense", C, C, true, nn::LinearLayout::linear);
    transform_norm_.emplace(ps, "cls.predictions.transform.LayerNorm", C, nn::NormKind::layer,
                            cfg_.layer_norm_eps);
    decoder_.emplace(ps, "cls.predictions.decoder", C, V, words_->weight(), mlm_bias_);
  }
  SNUG_ASSERT(count_params(parameters()) == cfg_.num_params(), "BERT parameter count");
}

Bert::~Bert() = default;

ModelSummary Bert::summary() const {
  return common_shape_config(cfg_, "bert", nullptr).shape;
}

std::map<std::string, std::string> Bert::weights_metadata() const {
  return {{"format", "pt"},
          {"model", cfg_.name},
          {"model_type", "bert"},
          {"task", task_name(cfg_.task)}};
}

void Bert::init_weights(uint64_t seed) {
  ctx().dropout_seed = seed;
  NormalGenerator rng(seed);
  const float std = static_cast<float>(cfg_.initializer_range);
  const int64_t C = cfg_.hidden_size, pad = cfg_.pad_token_id;
  for (Parameter* p : parameters()) {
    const std::string& n = p->name;
    const bool norm = n.find("LayerNorm") != std::string::npos;
    const bool words = n == words_->weight()->name;
    int64_t at = 0;  // elements filled so far (the padding row of the word embeddings is 0)
    nn::fill_values(*p, device().ops(), [&](float* d, int64_t cnt) {
      if (norm) {
        for (int64_t i = 0; i < cnt; ++i) d[i] = n.ends_with(".weight") ? 1.0f : 0.0f;
      } else if (n.ends_with("bias")) {
        for (int64_t i = 0; i < cnt; ++i) d[i] = 0.0f;
      } else {
        rng.fill(d, cnt, 0.0f, std);
        if (words)
          for (int64_t i = 0; i < cnt; ++i)
            if ((at + i) / C == pad) d[i] = 0.0f;
      }
      at += cnt;
    });
  }
}

void Bert::apply_attention(AttentionImpl a) {
  for (nn::EncoderLayer& layer : layers_) layer.set_attention(a);
}

const Tensor& Bert::logits() const {
  SNUG_CHECK(saved_ && (saved_->probs.defined() || saved_->head.probs.defined()),
             "logits(): no forward pass has run");
  return classifies() ? saved_->probs : saved_->head.probs;
}

void Bert::drop_saved() {
  saved_.reset();
}

std::vector<const Parameter*> Bert::head_gemm_weights() const {
  if (classifies()) return {pooler_->weight(), classifier_->weight()};
  return {words_->weight(), transform_->weight()};
}

void Bert::layer_forward(size_t l, Saved& s) {
  const Tensor& x = l == 0 ? s.x0 : s.outs[l - 1];
  s.outs[l] = layers_[l].forward(x, s.layers[l]);
}

float Bert::forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                    bool for_backward, float loss_scale) {
  const int64_t V = cfg_.vocab_size, C = cfg_.hidden_size, N = B * T;
  check_tokens(tokens, B, T, V, cfg_.max_position_embeddings, "max_position_embeddings");
  if (!token_types_.empty()) {
    SNUG_CHECK(static_cast<int64_t>(token_types_.size()) == N, "forward: ", token_types_.size(),
               " token type ids for a batch of ", B, " x ", T);
    for (int64_t i = 0; i < N; ++i)
      SNUG_CHECK(token_types_[i] >= 0 && token_types_[i] < cfg_.type_vocab_size,
                 "forward: token type id ", token_types_[i], " at position ", i, " is outside [0, ",
                 cfg_.type_vocab_size, ") (type_vocab_size of ", cfg_.name, ")");
  }
  valid_targets_ = 0;
  std::vector<int32_t> labels;
  if (targets) {
    for (int64_t i = 0; i < N; ++i) {
      if (classifies()) {
        const int64_t b = i / T;
        if (i % T == 0) {
          SNUG_CHECK(targets[i] < cfg_.num_labels, "forward: label ", targets[i], " of row ", b,
                     " is outside the ", cfg_.num_labels, " labels [0, ", cfg_.num_labels, ")");
          labels.push_back(targets[i]);
        } else {
          SNUG_CHECK(targets[i] < 0, "forward: sequence classification takes one label per row, ",
                     "in column 0 (targets[b*T]); row ", b, " has ", targets[i], " at column ",
                     i % T);
        }
      } else {
        SNUG_CHECK(targets[i] < V, "forward: target id ", targets[i], " at position ", i,
                   " is outside the vocabulary [0, ", V, ")");
      }
      valid_targets_ += (!classifies() || i % T == 0) && targets[i] >= 0 ? 1 : 0;
    }
  }
  saved_.reset();
  auto s = std::make_unique<Saved>();
  begin_forward(*s, B, T, targets != nullptr, for_backward);
  Tensor tokens_t = host_ids(tokens, {B, T});
  Tensor types_t;
  {
    const std::vector<int32_t> zeros(token_types_.empty() ? static_cast<size_t>(N) : 0, 0);
    types_t = host_ids(token_types_.empty() ? zeros.data() : token_types_.data(), {B, T});
  }
  Tensor targets_t;
  if (targets) targets_t = classifies() ? host_ids(labels.data(), {B}) : host_ids(targets, {B, T});
  nn::RunContext& c = ctx();
  const OpTable& ops = c.ops();
  Device& dev = device();
  MemoryPool& pool = dev.pool();
  {
    // x0 = dropout(LayerNorm(words[ids] + positions[t] + types[type ids])).
    const Tensor e = nn::activation(dev, {B, T, C});  // the LayerNorm's saved input
    words_->forward(tokens_t, e, s->words);
    // NEFTune on the word embeddings (nn/neftune.h); after the positions is the same sum.
    if (for_backward && neftune_alpha() > 0) nn::add_neftune_noise(c, e, neftune_alpha());
    Tensor te = nn::temporary(dev, {B, T, C});
    types_->forward(types_t, te, s->types);
    ops.add(nn::f32(e), nn::f32(e), nn::f32(te), N * C);
    te.reset();
    tokens_t.reset();  // the Saveds keep the ids
    types_t.reset();
    s->x0 = nn::activation(dev, {B, T, C});
    emb_norm_->forward(e, s->x0, s->emb_norm);
    if (for_backward && cfg_.hidden_dropout_prob > 0) {
      s->emb_mask = Tensor::empty({B, T, C}, DType::u8, Category::activations, dev);
      ops.dropout_forward(nn::f32(s->x0), s->emb_mask.data<uint8_t>(), nn::f32(s->x0), N * C,
                          cfg_.hidden_dropout_prob,
                          c.at_first_row(c.dropout_key(kEmbeddingsDropoutLayer, 0), N * C));
    }
    if (!for_backward) s->emb_norm = {};
  }

  const bool segments = segmented(for_backward);
  const size_t L = layer_slots(*s);
  for (size_t l = 0; l < L; ++l) {
    pool.set_phase(phase("forward", l));
    layer_forward(l, *s);
    if (l == 0 && !for_backward) s->x0.reset();
    if (!for_backward || segments) s->layers[l] = {};
    if (for_backward && ckpt().policy == CheckpointPolicy::selective)
      layers_[l].drop_selective(s->layers[l]);
    // A layer's input is kept by its attention's Saved (or, checkpointing, as a segment input).
    if (l > 0 && !(segments && segment_end(l - 1))) s->outs[l - 1].reset();
    if (for_backward) layers_[l].compact(s->layers[l]);
  }
  pool.set_phase("forward head");
  const double loss = head_forward(s->outs.back(), targets_t, for_backward, loss_scale, *s);
  if (!for_backward) {
    s->layers.clear();
    s->outs.clear();
    c.free_compute_weights();
  }
  pool.set_phase("forward done");
  saved_ = std::move(s);
  return static_cast<float>(loss);
}

double Bert::head_forward(const Tensor& x, const Tensor& targets, bool for_backward, float scale,
                          Saved& s) {
  Device& dev = device();
  nn::RunContext& c = ctx();
  const OpTable& ops = c.ops();
  const int64_t B = s.B, T = s.T, C = cfg_.hidden_size;
  s.valid = valid_targets_;
  s.loss_scale = scale;
  if (!classifies()) {
    // cls.predictions: LayerNorm(gelu(dense(x))) -> decoder (tied) + bias.
    s.pre = nn::activation(dev, {B, T, C});
    transform_->forward(x, s.pre, s.transform_lin);
    const Tensor g = nn::activation(dev, {B, T, C});  // the LayerNorm's saved input
    ops.gelu_erf_forward(nn::f32(g), nn::f32(s.pre), B * T * C);
    const Tensor xf = nn::activation(dev, {B, T, C});
    transform_norm_->forward(g, xf, s.transform_norm);
    c.round_half(xf);
    if (!for_backward) {
      s.pre.reset();
      s.transform_lin = {};
      s.transform_norm = {};
    }
    return decoder_->forward(xf, targets, s.valid, LogitsMode::full, for_backward, scale, false,
                             s.head);
  }
  // Pooler on each row's first token, tanh, dropout, classifier.
  const int64_t NL = cfg_.num_labels;
  const Tensor first = nn::activation(dev, {B, C});
  for (int64_t b = 0; b < B; ++b)
    dev.copy(nn::offset(nn::f32(first), b * C), nn::offset(nn::f32(x), b * T * C), C);
  s.pooled = nn::activation(dev, {B, C});
  pooler_->forward(first, s.pooled, s.pooler_lin);
  ops.tanh_forward(nn::f32(s.pooled), nn::f32(s.pooled), B * C);
  const Tensor pd = nn::activation(dev, {B, C});  // the classifier's saved input
  const double p = cfg_.pooler_dropout();
  if (for_backward && p > 0) {
    s.cls_mask = Tensor::empty({B, C}, DType::u8, Category::activations, dev);
    ops.dropout_forward(nn::f32(pd), s.cls_mask.data<uint8_t>(), nn::f32(s.pooled), B * C, p,
                        c.at_first_row(c.dropout_key(kPoolerDropoutLayer, 0), B * C));
  } else {
    device().copy(nn::f32(pd), nn::f32(s.pooled), B * C);
  }
  c.round_gemm_input(pd);
  s.probs = nn::activation(dev, {B, NL});  // logits, then probabilities, then their gradient
  classifier_->forward(pd, s.probs, s.cls_lin);
  if (!for_backward) {
    s.pooler_lin = {};
    s.cls_lin = {};
    s.pooled.reset();
  }
  if (!targets.defined()) return 0.0;
  s.labels = targets;
  s.losses = nn::activation(dev, {B});
  const double sum = ops.softmax_xent_forward(nn::f32(s.losses), nn::f32(s.probs), nn::f32(s.probs),
                                              targets.data<int32_t>(), B, NL);
  return s.valid > 0 ? sum / static_cast<double>(s.valid) : 0.0;
}

void Bert::head_backward(const Tensor& dres, Saved& s) {
  Device& dev = device();
  nn::RunContext& c = ctx();
  const OpTable& ops = c.ops();
  const int64_t B = s.B, T = s.T, C = cfg_.hidden_size;
  if (!classifies()) {
    Tensor dxf = decoder_->backward(s.head);
    s.head = {};
    Tensor dg = nn::temporary(dev, {B, T, C});
    dg.zero_();
    transform_norm_->backward(dxf, s.transform_norm, dg);
    dxf.reset();
    ops.gelu_erf_backward(nn::f32(dg), nn::f32(s.pre), nn::f32(dg), B * T * C);
    s.pre.reset();
    const Tensor dg16 = c.half_grad(dg, transform_->weight(), false);
    transform_->backward(dg16, s.transform_lin, dres, false);
    return;
  }
  const int64_t NL = cfg_.num_labels;
  const float scale = s.valid > 0 ? s.loss_scale / static_cast<float>(s.valid) : 0.0f;
  ops.softmax_xent_backward(nn::f32(s.probs), nn::f32(s.probs), s.labels.data<int32_t>(), scale, B,
                            NL);
  s.losses.reset();
  Tensor dpd = nn::temporary(dev, {B, C});
  {
    const Tensor g16 = c.half_grad(s.probs, classifier_->weight(), false);
    classifier_->backward(g16, s.cls_lin, dpd, false);
  }
  s.probs.reset();
  if (s.cls_mask.defined()) {
    ops.dropout_backward(nn::f32(dpd), nn::f32(dpd), s.cls_mask.data<uint8_t>(), B * C,
                         cfg_.pooler_dropout());
    s.cls_mask.reset();
  }
  ops.tanh_backward(nn::f32(dpd), nn::f32(s.pooled), nn::f32(dpd), B * C);
  s.pooled.reset();
  Tensor dfirst = nn::temporary(dev, {B, C});
  {
    const Tensor g16 = c.half_grad(dpd, pooler_->weight(), false);
    pooler_->backward(g16, s.pooler_lin, dfirst, false);
  }
  Tensor(dres).zero_();  // a handle on the same storage
  for (int64_t b = 0; b < B; ++b)
    device().copy(nn::offset(nn::f32(dres), b * T * C), nn::offset(nn::f32(dfirst), b * C), C);
}

void Bert::backward(float loss_scale) {
  check_backward(saved_.get());
  Saved& s = *saved_;
  nn::RunContext& c = ctx();
  const OpTable& ops = c.ops();
  Device& dev = device();
  MemoryPool& pool = dev.pool();
  pool.set_phase("backward head");
  s.loss_scale = loss_scale;
  s.head.loss_scale = loss_scale;
  const int64_t B = s.B, T = s.T, C = cfg_.hidden_size, n = B * T * C;
  Tensor dres = nn::temporary(dev, {B, T, C});  // reused layer to layer
  head_backward(dres, s);
  c.flush_grads();
  const ParameterList& list = parameters();
  for (size_t i = head_params_begin_; i < list.size(); ++i)
    if (list[i] != words_->weight()) ready(list[i]);

  for (size_t li = layers_.size(); li-- > 0;) {
    nn::EncoderLayer::Saved& a = s.layers[li];
    if (!a.attn.q.defined()) {
      // Segment checkpointing: recompute this layer's segment from its saved input.
      pool.set_phase(phase("recompute", li));
      const size_t k = static_cast<size_t>(ckpt().every_k);
      s.outs[li].reset();
      const size_t start = li - li % k;
      for (size_t j = start; j <= li; ++j) layer_forward(j, s);
      for (size_t j = start; j < li; ++j) layers_[j].compact(s.layers[j]);
      // The attentions' Saveds hold their inputs now (16-bit under mixed precision).
      for (size_t j = start; j < li; ++j) s.outs[j].reset();
      if (start > 0) s.outs[start - 1].reset();
    } else {
      layers_[li].widen(a);
      if (ckpt().policy == CheckpointPolicy::selective) {
        pool.set_phase(phase("recompute", li));
        layers_[li].recompute_selective(a);
      }
    }
    pool.set_phase(phase("backward", li));
    s.outs[li].reset();
    layers_[li].backward(dres, a);
    c.flush_grads();
    layer_ready(li);
  }

  pool.set_phase("backward embeddings");
  if (s.emb_mask.defined()) {
    ops.dropout_backward(nn::f32(dres), nn::f32(dres), s.emb_mask.data<uint8_t>(), n,
                         cfg_.hidden_dropout_prob);
    s.emb_mask.reset();
  }
  s.x0.reset();
  {
    Tensor de = nn::temporary(dev, {B, T, C});
    de.zero_();
    emb_norm_->backward(dres, s.emb_norm, de);
    dres.reset();
    words_->backward(de, s.words);
    types_->backward(de, s.types);
  }
  c.flush_grads();
  ready_range(0, first_layer_param());
  saved_.reset();
  c.free_compute_weights();
  pool.set_phase("backward done");
}

}  // namespace snug

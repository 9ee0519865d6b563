// BERT (Hugging Face BertForMaskedLM / BertForSequenceClassification) composed of src/nn blocks:
// word + learned position + token type embeddings, LayerNorm and dropout; L post-norm
// EncoderLayers (bidirectional attention, GELU erf, hidden and attention-probability dropout);
// then one of two heads:
//   masked-lm                cls.predictions: transform dense, GELU, LayerNorm, then the decoder
//                            tied to the word embeddings plus cls.predictions.bias, mean
//                            cross-entropy over the targets >= 0 (the masked positions);
//   sequence-classification  bert.pooler.dense on each row's first token, tanh, dropout,
//                            classifier; mean cross-entropy over the rows' labels.
//
// The encoder composition on the models' one base (models/block_model.h: parameter store, run
// options, grad-ready hook, LoRA). How the Model interface carries these tasks (models/model.h,
// "Tasks"): forward()'s targets (B,T) are per-token labels for masked-lm (-100 where not
// masked), and for sequence-classification one label per row in column 0 (targets[b*T]), every
// other entry -100.
// Token type ids default to 0; set_token_type_ids() gives others for the forwards that follow.
//
// Parameter names are the Hugging Face state_dict keys, in named_parameters() order.
//
// What forward keeps (beyond the layers' Saveds, nn/encoder_layer.h):
//   embeddings  tokens, token types (B,T) int32; the LayerNorm's input (B,T,C) and statistics;
//               the dropout mask (B,T,C) uint8 in training
//   masked-lm   transform input (B,T,C), pre-GELU (B,T,C), LayerNorm input and statistics, the
//               decoder input (B,T,C), logits -> probabilities (B,T,V)
//   seq-cls     pooler input (B,C), tanh output (B,C), dropout mask (B,C), classifier input
//               (B,C), probabilities (B,labels)
// Gradient checkpointing: every-layer / every-k keep each segment's input and recompute the
// segment before its backward (same kernels, same dropout keys: bitwise the same values);
// selective keeps the GEMM outputs and recomputes each layer's cheap tensors before its backward
// (nn/encoder_layer.h: the first LayerNorm's output, naive attention's probabilities, GELU's
// output). NEFTune adds its noise to the word embeddings' output, as the HF Trainer's hook on
// get_input_embeddings() does.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "models/bert/bert_config.h"
#include "models/block_model.h"
#include "nn/embedding.h"
#include "nn/encoder_layer.h"
#include "nn/linear.h"
#include "nn/lm_head_loss.h"
#include "nn/norm.h"
#include "nn/parameter_store.h"
#include "quant/weight_quant.h"

namespace snug {

class Bert final : public BlockModel {
 public:
  Bert(const BertConfig& cfg, Device& dev, DType param_dtype = DType::f32,
       const std::optional<WeightQuantConfig>& quant = std::nullopt);
  ~Bert() override;

  const BertConfig& config() const { return cfg_; }
  ModelSummary summary() const override;
  // transformers' BertPreTrainedModel._init_weights: Linear and Embedding weights
  // normal(0, initializer_range) (the pad_token_id row of the word embeddings 0), biases 0,
  // LayerNorm 1/0, the MLM bias 0. Also seeds the dropout masks (RunContext::dropout_seed).
  void init_weights(uint64_t seed) override;
  std::map<std::string, std::string> weights_metadata() const override;

  float forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                bool for_backward = true, float loss_scale = 1.0f) override;
  // masked-lm: (B,T,V) probabilities; seq-cls: (B,labels) probabilities (logits without targets).
  // The MLM decoder has a bias: its logits are always full (the chunked kernels have none),
  // whatever set_logits_mode() says.
  const Tensor& logits() const override;
  void backward(float loss_scale = 1.0f) override;

  // Packing is for causal LMs: BERT attends both ways over learned positions.
  void set_position_ids(std::vector<int32_t> ids) override {
    SNUG_CHECK(ids.empty(), "position ids: ", position_ids_unsupported());
  }
  std::string position_ids_unsupported() const override {
    return cfg_.name + " (BERT) has learned positions and bidirectional attention";
  }
  ModelTask task() const override { return cfg_.task; }

  // Token type ids (B,T) for the forwards that follow (each in [0, type_vocab_size)); empty: 0.
  void set_token_type_ids(std::vector<int32_t> ids) { token_types_ = std::move(ids); }

 private:
  struct Saved;
  bool classifies() const { return cfg_.task == ModelTask::sequence_classification; }
  void drop_saved() override;
  void apply_attention(AttentionImpl a) override;
  // The heads' GEMM weights: the pooler's and classifier's, or the tied decoder's and the
  // transform's.
  std::vector<const Parameter*> head_gemm_weights() const override;
  void layer_forward(size_t l, Saved& s);
  double head_forward(const Tensor& x, const Tensor& targets, bool for_backward, float scale,
                      Saved& s);
  // d/d(last layer's output) into dres (B,T,C).
  void head_backward(const Tensor& dres, Saved& s);

  BertConfig cfg_;
  std::optional<nn::Embedding> words_;  // word + position embeddings
  std::optional<nn::Embedding> types_;
  std::optional<nn::Norm> emb_norm_;
  std::vector<nn::EncoderLayer> layers_;
  size_t head_params_begin_ = 0;
  // masked-lm
  Parameter* mlm_bias_ = nullptr;
  std::optional<nn::Linear> transform_;
  std::optional<nn::Norm> transform_norm_;
  std::optional<nn::LMHeadLoss> decoder_;
  // sequence classification
  std::optional<nn::Linear> pooler_, classifier_;

  std::unique_ptr<Saved> saved_;
  std::vector<int32_t> token_types_;
};

}  // namespace snug

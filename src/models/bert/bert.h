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
// How the one Model interface carries these tasks (models/model.h, "Tasks"): forward()'s
// targets (B,T) are per-token labels for masked-lm (-100 where not masked), and for
// sequence-classification one label per row in column 0 (targets[b*T]), every other entry -100.
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
#include "models/model.h"
#include "nn/embedding.h"
#include "nn/encoder_layer.h"
#include "nn/linear.h"
#include "nn/lm_head_loss.h"
#include "nn/norm.h"
#include "nn/parameter_store.h"
#include "quant/weight_quant.h"

namespace snug {

class Bert final : public Model {
 public:
  Bert(const BertConfig& cfg, Device& dev, DType param_dtype = DType::f32,
       const std::optional<WeightQuantConfig>& quant = std::nullopt);
  ~Bert() override;
  Bert(const Bert&) = delete;
  Bert& operator=(const Bert&) = delete;

  const BertConfig& config() const { return cfg_; }
  ModelSummary summary() const override;
  Device& device() const override { return *dev_; }
  const ParameterList& parameters() const override { return ps_.list(); }
  Parameter* find(const std::string& name) const override { return ps_.find(name); }
  // transformers' BertPreTrainedModel._init_weights: Linear and Embedding weights
  // normal(0, initializer_range) (the pad_token_id row of the word embeddings 0), biases 0,
  // LayerNorm 1/0, the MLM bias 0. Also seeds the dropout masks (RunContext::dropout_seed).
  void init_weights(uint64_t seed) override;
  std::map<std::string, std::string> weights_metadata() const override;

  float forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                bool for_backward = true, float loss_scale = 1.0f) override;
  int64_t last_valid_targets() const override { return valid_targets_; }
  // masked-lm: (B,T,V) probabilities; seq-cls: (B,labels) probabilities (logits without targets).
  const Tensor& logits() const override;
  void backward(float loss_scale = 1.0f) override;
  void free_activations() override;
  void zero_grad() override { ps_.zero_grad(); }

  void set_attention(AttentionImpl a) override;
  AttentionImpl attention() const override { return attention_; }
  // The MLM decoder has a bias: its logits are always full (the chunked kernels have none).
  void set_logits_mode(LogitsMode m) override { logits_ = m; }
  LogitsMode logits_mode() const override { return logits_; }
  void set_checkpointing(const CheckpointConfig& c) override;
  const CheckpointConfig& checkpointing() const override { return ckpt_; }
  void set_compute_dtype(ComputeDType d) override { ctx().compute = d; }
  ComputeDType compute_dtype() const override { return ctx().compute; }
  void set_gemm_path(kernels::GemmPath p) override { ctx().gemm_path = p; }
  kernels::GemmPath gemm_path() const override { return ctx().gemm_path; }
  int64_t num_compute_copy_params() const override;
  DType param_dtype() const override { return ps_.param_dtype(); }
  void set_grad_ready_hook(std::function<void(Parameter&)> hook) override {
    grad_ready_ = std::move(hook);
  }
  void set_neftune_noise_alpha(double alpha) override { neftune_alpha_ = alpha; }
  void set_forward_count(uint64_t n) override { ctx().forward_count = n; }
  // Packing is for causal LMs: BERT attends both ways over learned positions.
  void set_position_ids(std::vector<int32_t> ids) override {
    SNUG_CHECK(ids.empty(), "position ids: ", position_ids_unsupported());
  }
  std::string position_ids_unsupported() const override {
    return cfg_.name + " (BERT) has learned positions and bidirectional attention";
  }

  void add_lora(const LoraConfig& cfg, uint64_t seed) override;
  const std::vector<LoraAdapter>& lora_adapters() const override { return lora_; }
  const LoraConfig& lora_config() const override { return ctx().lora; }
  ModelTask task() const override { return cfg_.task; }
  std::vector<float> merged_weight(const LoraAdapter& a) const override;
  void set_dequant_bf16(bool on) override { ctx().dequant_bf16 = on; }
  void read_values(const Parameter& p, float* out) const override;

  // Token type ids (B,T) for the forwards that follow (each in [0, type_vocab_size)); empty: 0.
  void set_token_type_ids(std::vector<int32_t> ids) { token_types_ = std::move(ids); }

 private:
  struct Saved;
  nn::RunContext& ctx() const { return ps_.context(); }
  bool classifies() const { return cfg_.task == ModelTask::sequence_classification; }
  bool segment_end(size_t l) const;
  void layer_forward(size_t l, Saved& s);
  void ready(Parameter* p);
  std::vector<const Parameter*> gemm_weights() const;
  std::string phase(const char* what, size_t l) const;
  double head_forward(const Tensor& x, const Tensor& targets, bool for_backward, float scale,
                      Saved& s);
  // d/d(last layer's output) into dres (B,T,C).
  void head_backward(const Tensor& dres, Saved& s);

  BertConfig cfg_;
  Device* dev_;
  mutable ParameterStore ps_;
  std::optional<nn::Embedding> words_;  // word + position embeddings
  std::optional<nn::Embedding> types_;
  std::optional<nn::Norm> emb_norm_;
  std::vector<nn::EncoderLayer> layers_;
  std::vector<std::pair<size_t, size_t>> layer_params_;
  std::vector<std::vector<nn::Linear*>> linears_;
  size_t head_params_begin_ = 0;
  // masked-lm
  Parameter* mlm_bias_ = nullptr;
  std::optional<nn::Linear> transform_;
  std::optional<nn::Norm> transform_norm_;
  std::optional<nn::LMHeadLoss> decoder_;
  // sequence classification
  std::optional<nn::Linear> pooler_, classifier_;

  std::unique_ptr<Saved> saved_;
  AttentionImpl attention_ = AttentionImpl::flash;
  CheckpointConfig ckpt_;
  LogitsMode logits_ = LogitsMode::full;
  std::vector<LoraAdapter> lora_;
  std::vector<int32_t> token_types_;
  int64_t valid_targets_ = 0;
  double neftune_alpha_ = 0.0;
  std::function<void(Parameter&)> grad_ready_;
};

}  // namespace snug

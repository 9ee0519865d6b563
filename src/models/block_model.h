// The one base of every model family (issue 28): what a model composed of src/nn blocks owns,
// whatever its shape. The compositions on it own their blocks and the forward and backward that
// run them:
//   DecoderLM (models/decoder_lm.h)  decoder-only causal LMs (GPT-2, Llama/Mistral/Qwen2, GPT-NeoX)
//   Bert (models/bert/bert.h)        the bidirectional encoder, masked-LM and classification heads
//
// What the base owns, for both:
//   - the parameter store (Hugging Face named_parameters() order) and its RunContext, which every
//     block reads (nn/run_context.h);
//   - the run options of the Model interface (attention kernel, logits mode, checkpoint policy,
//     compute dtype, GEMM path, dequantization dtype, forward count, NEFTune's alpha);
//   - the grad-ready listeners (LOMO, data-parallel buckets; models/grad_ready.h), the micro-batch
//     they are told, and the order parameters are handed over, layer by layer;
//   - LoRA on the layers' Linears: adapters, PEFT's freezing, merged weights, fp32 values of any
//     parameter;
//   - the layers' bookkeeping: which parameters and Linears each layer owns, the memory phases
//     named after the layers ("forward h.3"), checkpoint segments, and the input checks every
//     forward makes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"
#include "nn/linear.h"
#include "nn/parameter_store.h"

namespace snug {

class BlockModel : public Model {
 public:
  ~BlockModel() override;
  BlockModel(const BlockModel&) = delete;
  BlockModel& operator=(const BlockModel&) = delete;

  Device& device() const final { return *dev_; }
  const ParameterList& parameters() const final { return ps_.list(); }
  Parameter* find(const std::string& name) const final { return ps_.find(name); }
  int64_t last_valid_targets() const final { return valid_targets_; }
  // Drops what the last forward kept and the run's compute copies.
  void free_activations() final;
  void zero_grad() final { ps_.zero_grad(); }

  void set_attention(AttentionImpl a) final;
  AttentionImpl attention() const final { return attention_; }
  void set_logits_mode(LogitsMode m) final { logits_ = m; }
  LogitsMode logits_mode() const final { return logits_; }
  void set_checkpointing(const CheckpointConfig& c) final;
  const CheckpointConfig& checkpointing() const final { return ckpt_; }
  void set_compute_dtype(ComputeDType d) final { ctx().compute = d; }
  ComputeDType compute_dtype() const final { return ctx().compute; }
  // Which GEMM runs the bf16 products (kernels/gemm_path.h); see nn/run_context.h.
  void set_gemm_path(kernels::GemmPath p) final { ctx().gemm_path = p; }
  kernels::GemmPath gemm_path() const final { return ctx().gemm_path; }
  void set_lm_head_budget(int64_t floats) final { ctx().lm_head_budget_floats = floats; }
  // The GEMM weights (the heads', then the layers' Linears'), but none under --bf16-full (the
  // parameters are the copies) and no quantized one (dequantized per use instead).
  int64_t num_compute_copy_params() const final;
  DType param_dtype() const final { return ps_.param_dtype(); }
  GradReadyId add_grad_ready_listener(GradReadyListener listener) final {
    return grad_ready_.add(std::move(listener));
  }
  void remove_grad_ready_listener(GradReadyId id) final { grad_ready_.remove(id); }
  void set_micro_batch(int64_t m, int64_t n) final { grad_ready_.set_micro_batch(m, n); }
  void set_head_grad_last(bool on) final { head_grad_last_ = on; }
  bool head_grad_last() const final { return head_grad_last_; }
  // A family that runs its blocks through the gatherer overrides
  // parameter_gathering_unsupported() with "" (DecoderLM); setting one on another is refused.
  void set_parameter_gatherer(ParameterGatherer* g) final;
  std::string parameter_gathering_unsupported() const override;
  void set_neftune_noise_alpha(double alpha) final { neftune_alpha_ = alpha; }
  void set_forward_count(uint64_t n) final { ctx().forward_count = n; }
  void set_first_row(int64_t row) final { ctx().first_row = row; }

  // LoRA: an adapter pair on every Linear of the layers that `cfg` targets (PEFT's
  // get_peft_model with bias="none"); every other parameter is frozen but the task's
  // peft_modules_to_save (models/model_config.h). The adapters join parameters() after the base
  // ones. A from `seed` (kaiming_uniform(a = sqrt(5))), B zero. Call once, after the base
  // weights are loaded. Throws naming --target-modules when a key matches no module.
  void add_lora(const LoraConfig& cfg, uint64_t seed) final;
  const std::vector<LoraAdapter>& lora_adapters() const final { return lora_; }
  const LoraConfig& lora_config() const final { return ctx().lora; }
  std::vector<float> merged_weight(const LoraAdapter& a) const final;
  void set_dequant_bf16(bool on) final { ctx().dequant_bf16 = on; }
  void read_values(const Parameter& p, float* out) const final;

 protected:
  // `name`: the model in messages. `layer_prefix`: the layers' parameter-name prefix
  // ("transformer.h.", + the layer index). `phase_label`: layer l's memory phases are
  // "<what> <phase_label><l>" ("forward h.3"). `attention`, `logits`: the run options' defaults.
  BlockModel(Device& dev, std::string name, std::string layer_prefix, std::string phase_label,
             AttentionImpl attention, LogitsMode logits);

  ParameterStore& store() { return ps_; }
  nn::RunContext& ctx() const { return ps_.context(); }
  const std::string& model_name() const { return name_; }
  const std::string& layer_prefix() const { return layer_prefix_; }
  const CheckpointConfig& ckpt() const { return ckpt_; }
  LogitsMode logits_option() const { return logits_; }
  double neftune_alpha() const { return neftune_alpha_; }

  // Registers the next layer while constructing: its parameters are [begin, end) of
  // parameters(), `linears` its Linears in slot order (LoRA's targets).
  void add_layer(size_t begin, size_t end, std::vector<nn::Linear*> linears);
  size_t num_layers() const { return layer_params_.size(); }
  // Sizes a forward's per-layer state (s.layers, the layers' Saveds; s.outs, their outputs);
  // returns the number of layers.
  template <class S>
  size_t layer_slots(S& s) const {
    s.layers.resize(num_layers());
    s.outs.resize(num_layers());
    return num_layers();
  }
  // Where layer 0's parameters begin (the embeddings' end).
  size_t first_layer_param() const { return layer_params_.front().first; }

  // The checks every forward makes: B and T positive, T within `max_positions` (its config.json
  // key `positions_key`, for the message), every token id in [0, vocab).
  void check_tokens(const int32_t* tokens, int64_t B, int64_t T, int64_t vocab,
                    int64_t max_positions, const std::string& positions_key) const;
  // What every composition's saved forward starts with.
  struct SavedRun {
    int64_t B = 0, T = 0;
    bool has_targets = false, for_backward = false;
  };
  // Starts a forward's run: `s`'s shape, the training flag, the forward count (it keys dropout
  // masks and NEFTune noise) and, in mixed precision, fresh 16-bit copies of the GEMM weights;
  // then the memory phase "forward embeddings".
  void begin_forward(SavedRun& s, int64_t B, int64_t T, bool has_targets, bool for_backward);
  // `shape` int32 ids (tokens, targets, position or token type ids) copied from host memory
  // into a tensor on the device (category input_data).
  Tensor host_ids(const int32_t* ids, const Shape& shape) const;
  // Throws unless `s` is a forward with targets kept for backward.
  static void check_backward(const SavedRun* s);
  // Whether segment checkpointing (every_layer, every_k) applies to a forward.
  bool segmented(bool for_backward) const;
  // Whether layer l ends a checkpoint segment.
  bool segment_end(size_t l) const;
  std::string phase(const char* what, size_t l) const;

  // ZeRO stage 3 (models/param_gather.h): parameters [begin, end) of parameters(), one
  // parameter, or layer l's (its base parameters and its adapters') made whole before a block
  // runs and given back after it; no-ops without a gatherer.
  void acquire_range(size_t begin, size_t end);
  void release_range(size_t begin, size_t end);
  void acquire(Parameter* p);
  void release(Parameter* p);
  void acquire_layer(size_t l);
  void release_layer(size_t l);

  // The grad-ready listeners get `p` if it trains and has a gradient.
  void ready(Parameter* p);
  // Parameters [begin, end) of parameters() to the listeners, in that order.
  void ready_range(size_t begin, size_t end);
  // Layer l's base parameters in parameters() order, then its adapters' (A, B of each adapted
  // Linear in the layer's slot order), to the listeners.
  void layer_ready(size_t l);

  // The composition's part: its saved activations dropped, the attention kernel given to its
  // layers, the GEMM weights of its embeddings and heads that get 16-bit compute copies.
  virtual void drop_saved() = 0;
  virtual void apply_attention(AttentionImpl a) = 0;
  virtual std::vector<const Parameter*> head_gemm_weights() const = 0;

  // head_gemm_weights(), then every layer's Linear weights.
  std::vector<const Parameter*> gemm_weights() const;

  int64_t valid_targets_ = 0;  // the last forward's (last_valid_targets())

 private:
  Device* dev_;
  ParameterStore ps_;
  std::string name_, layer_prefix_, phase_label_;
  std::vector<std::pair<size_t, size_t>> layer_params_;  // [begin, end) in parameters()
  std::vector<std::vector<nn::Linear*>> linears_;        // per layer, in slot order
  AttentionImpl attention_;
  LogitsMode logits_;
  CheckpointConfig ckpt_;
  std::vector<LoraAdapter> lora_;
  double neftune_alpha_ = 0.0;
  GradReadyListeners grad_ready_;
  bool head_grad_last_ = false;
  ParameterGatherer* gatherer_ = nullptr;
};

}  // namespace snug

// A decoder-only causal language model composed from src/nn blocks: token (and learned position)
// embeddings, L pre-norm DecoderLayers, a final norm and the LM head with cross-entropy. Every
// family of this shape is a DecoderLMSpec (sizes, Hugging Face names, the layer's blocks) plus
// its own initialization and weights metadata: GPT-2 (models/gpt2.h) is one, and the next family
// is another spec, not a copy.
//
// What the model adds to the blocks is the run around them (all device-independent: kernels go
// through the op table, tensors are allocated on meta too):
//   - mixed precision: 16-bit compute copies of the GEMM weights per forward, the layers' saved
//     tensors compacted to 16 bits after each layer and widened before its backward
//     (nn/run_context.h, docs/mixed-precision.md);
//   - gradient checkpointing (nn/run_options.h): every_layer / every_k keep only the inputs of
//     segments and recompute a segment before its backward; selective drops the cheap tensors
//     and recomputes them (DecoderLayer::drop_selective);
//   - the grad-ready hook (LOMO): each layer's parameters (then its adapters') are handed over
//     right after the layer's backward, the final norm's after its own, the embeddings' at the
//     very end; with a hook the chunked head defers the tied/untied head weight's gradient to the
//     end of backward;
//   - LoRA on any Linear of the layers, NEFTune on the token embeddings, --bf16-full storage, a
//     quantized base (ParameterStore), memory phases named after the layers.
//
// Lifecycle of one training micro-step:
//   float loss = model.forward(tokens, targets, B, T);  // saves activations
//   model.backward(scale);   // accumulates scale * dLoss/dparam into each Parameter::grad
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/model.h"
#include "nn/decoder_layer.h"
#include "nn/embedding.h"
#include "nn/lm_head_loss.h"
#include "nn/norm.h"
#include "nn/parameter_store.h"
#include "quant/weight_quant.h"

namespace snug {

// Everything that makes a family's model: sizes, Hugging Face names, the blocks' configuration.
struct DecoderLMSpec {
  std::string name;  // the model's name in messages ("gpt2-124m")
  int64_t vocab = 0, hidden = 0, layers = 0;
  int64_t max_positions = 0;                                  // the longest sequence
  std::string max_positions_key = "max_position_embeddings";  // its config.json key, for messages
  std::string embed_name = "model.embed_tokens.weight";
  std::string positions_name;                  // learned positions (GPT-2's wpe), or none
  std::string layer_prefix = "model.layers.";  // + layer index
  nn::DecoderLayerConfig layer;                // the final norm uses its norm kind and eps
  std::string final_norm_name = "model.norm";
  std::string head_name = "lm_head";
  bool tie_word_embeddings = false;
};

class DecoderLM : public Model {
 public:
  // Allocates every parameter (category weights) on `dev`, uninitialized, in Hugging Face
  // named_parameters() order. param_dtype f32, or bf16/f16 (--bf16-full, --torch-dtype,
  // generation in 16 bits; LoRA adapters added later are fp32 whatever it is). With `quant`
  // (--load-in-8bit/--load-in-4bit) the layers' Linear weights are stored quantized and frozen;
  // every GEMM dequantizes its weight into a `temporary`.
  DecoderLM(const DecoderLMSpec& spec, Device& dev, DType param_dtype = DType::f32,
            const std::optional<WeightQuantConfig>& quant = std::nullopt);
  ~DecoderLM() override;
  DecoderLM(const DecoderLM&) = delete;
  DecoderLM& operator=(const DecoderLM&) = delete;

  const DecoderLMSpec& spec() const { return spec_; }
  Device& device() const override { return *dev_; }
  const ParameterList& parameters() const override { return ps_.list(); }
  Parameter* find(const std::string& name) const override { return ps_.find(name); }

  // tokens, targets: (B,T) host arrays; targets < 0 are ignored (HF's -100). T <= the model's
  // positions. Returns the mean cross-entropy over the valid targets (0 on meta). With
  // targets == nullptr only the logits are computed and kept (see logits()). Saves what
  // backward needs unless `for_backward` is false. `loss_scale` must be the value the following
  // backward() gets: with chunked logits the head's gradient is computed during forward.
  float forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                bool for_backward = true, float loss_scale = 1.0f) override;
  int64_t last_valid_targets() const override { return valid_targets_; }
  // (B,T,V) logits of the last forward without targets (probabilities when targets were given).
  const Tensor& logits() const override;
  void backward(float loss_scale = 1.0f) override;
  void free_activations() override;
  void zero_grad() override { ps_.zero_grad(); }

  void set_attention(AttentionImpl a) override;
  AttentionImpl attention() const override { return spec_.layer.attn.kernel; }
  void set_logits_mode(LogitsMode m) override { logits_ = m; }
  LogitsMode logits_mode() const override { return logits_; }
  void set_checkpointing(const CheckpointConfig& c) override;
  const CheckpointConfig& checkpointing() const override { return ckpt_; }
  void set_compute_dtype(ComputeDType d) override { ctx().compute = d; }
  ComputeDType compute_dtype() const override { return ctx().compute; }
  // Which GEMM runs the bf16 products (kernels/gemm_path.h); see nn/run_context.h.
  void set_gemm_path(kernels::GemmPath p) override { ctx().gemm_path = p; }
  kernels::GemmPath gemm_path() const override { return ctx().gemm_path; }
  int64_t num_compute_copy_params() const override;
  DType param_dtype() const override { return ps_.param_dtype(); }
  void set_grad_ready_hook(std::function<void(Parameter&)> hook) override {
    grad_ready_ = std::move(hook);
  }
  void set_neftune_noise_alpha(double alpha) override { neftune_alpha_ = alpha; }
  // Packed sequences: position ids (B,T) for the forwards that follow (each document restarting
  // at 0: attention within documents, rotary by these positions; nn/attention.h). Empty: every
  // row t is position t. Checked against each forward's B, T; not with learned positions yet.
  void set_position_ids(std::vector<int32_t> ids) override { position_ids_ = std::move(ids); }
  std::string position_ids_unsupported() const override {
    return spec_.positions_name.empty()
               ? std::string()
               : spec_.name + " has learned positions (" + spec_.positions_name + ")";
  }
  void set_forward_count(uint64_t n) override { ctx().forward_count = n; }

  // Generation: one KV-cache row per position and layer, NKV*hs wide (nn/kv_cache.h), in the
  // compute dtype (set_compute_dtype before asking).
  nn::KVCacheShape kv_cache_shape() const override;
  // Embeddings at positions len..len+T-1, each layer through its cached attention, then the final
  // norm and the head on each row's last token only: (B, V) logits (category activations).
  // Computing in 16 bits it rounds where forward() does; with fp32 parameters it casts the
  // 16-bit compute copies of the GEMM weights at the prefill (cache.len() == 0), keeping them for
  // the following tokens: free_activations() drops them (generate() does, at the end). 16-bit
  // parameters are read as they are, with no copy.
  Tensor forward_cached(const int32_t* tokens, int64_t B, int64_t T, nn::KVCache& cache) override;

  // LoRA: an adapter pair on every Linear of the layers that `cfg` targets (PEFT's
  // get_peft_model with bias="none"); every other parameter is frozen. The adapters join
  // parameters() after the base ones. A from `seed` (kaiming_uniform(a = sqrt(5))), B zero. Call
  // once, after the base weights are loaded. Throws naming --target-modules when a key matches
  // no module.
  void add_lora(const LoraConfig& cfg, uint64_t seed) override;
  const std::vector<LoraAdapter>& lora_adapters() const override { return lora_; }
  const LoraConfig& lora_config() const override { return ctx().lora; }
  std::vector<float> merged_weight(const LoraAdapter& a) const override;
  void set_dequant_bf16(bool on) override { ctx().dequant_bf16 = on; }
  void read_values(const Parameter& p, float* out) const override;

 protected:
  ParameterStore& store() { return ps_; }
  // transformers' _init_weights for the modules of a DecoderLM without a family rule of its own:
  // every weight of an nn.Linear or nn.Embedding (and an untied head) drawn from
  // normal(0, std) in parameters() order, every bias 0, every norm weight 1 (the norms named by
  // the spec). Deterministic for a seed on every platform; no-op values on meta.
  void init_normal_weights(uint64_t seed, float std);

 private:
  struct Saved;
  nn::RunContext& ctx() const { return ps_.context(); }
  bool segment_end(size_t l) const;
  // Runs layer l on its input, keeping its output in outs[l].
  void layer_forward(size_t l, Saved& s);
  // The layer's base parameters, then its adapters', to the grad-ready hook.
  void layer_ready(size_t l);
  void ready(Parameter* p);
  // The GEMM weights that get 16-bit compute copies: the head's, then the layers' Linears'.
  std::vector<const Parameter*> gemm_weights() const;
  std::string phase(const char* what, size_t l) const;

  DecoderLMSpec spec_;
  Device* dev_;
  ParameterStore ps_;
  // Blocks are built in the constructor's body, once the store knows the parameter dtype and
  // which weights are quantized.
  std::optional<nn::Embedding> embed_;
  std::vector<nn::DecoderLayer> layers_;
  std::vector<std::pair<size_t, size_t>> layer_params_;  // [begin, end) in parameters()
  std::optional<nn::Norm> norm_;
  std::pair<size_t, size_t> norm_params_;
  std::optional<nn::LMHeadLoss> head_;
  std::vector<std::vector<nn::Linear*>> linears_;  // per layer, in slot order
  std::unique_ptr<Saved> saved_;
  CheckpointConfig ckpt_;
  LogitsMode logits_ = LogitsMode::chunked;
  std::vector<LoraAdapter> lora_;
  double neftune_alpha_ = 0.0;
  std::vector<int32_t> position_ids_;
  int64_t valid_targets_ = 0;
  std::function<void(Parameter&)> grad_ready_;
};

}  // namespace snug

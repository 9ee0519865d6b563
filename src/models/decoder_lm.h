// A decoder-only causal language model composed from src/nn blocks: token (and learned position)
// embeddings, L pre-norm DecoderLayers, a final norm and the LM head with cross-entropy. Every
// family of this shape is a DecoderLMSpec (sizes, Hugging Face names, the layer's blocks) plus
// its own initialization and weights metadata: GPT-2 (models/gpt2/gpt2.h) is one, and the next
// family is another spec, not a copy.
//
// What the model adds to the blocks is the run around them (all device-independent: kernels go
// through the op table, tensors are allocated on meta too); the parameter store, the run options,
// the grad-ready hook and LoRA are its base's, shared with the encoder (models/block_model.h):
//   - mixed precision: 16-bit compute copies of the GEMM weights per forward, the layers' saved
//     tensors compacted to 16 bits after each layer and widened before its backward
//     (nn/run_context.h, docs/mixed-precision.md);
//   - gradient checkpointing (nn/run_options.h): every_layer / every_k keep only the inputs of
//     segments and recompute a segment before its backward; selective drops the cheap tensors
//     and recomputes them (DecoderLayer::drop_selective);
//   - grad-ready listeners (models/grad_ready.h; LOMO, data-parallel buckets), which get the
//     parameters that train, each once per backward, in this order (the all-reduce buckets rely
//     on it; tests/models/decoder_lm_test.cpp checks it):
//       1. the final norm's (weight, then bias), right after its backward;
//       2. the untied head weight (lm_head.weight), unless set_head_grad_last;
//       3. layer L-1, then L-2, ..., then 0, each right after its backward: the layer's
//          parameters in parameters() order, then its LoRA adapters' (A, B per adapted Linear,
//          in the layer's Linear order);
//       4. with set_head_grad_last, the untied head weight (its gradient computed only now);
//       5. the learned positions (GPT-2's wpe), then the token embeddings, which a tied head's
//          gradient is part of (so a tied head comes last either way).
//     set_head_grad_last changes when the head's gradient is computed and held (the memory
//     timeline), never its values; listening changes nothing;
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

#include "models/block_model.h"
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
  std::string positions_name = {};             // learned positions (GPT-2's wpe), or none
  std::string layer_prefix = "model.layers.";  // + layer index
  nn::DecoderLayerConfig layer = {};           // the final norm uses its norm kind and eps
  std::string final_norm_name = "model.norm";
  std::string head_name = "lm_head";
  bool tie_word_embeddings = false;
  float init_std = 0.02f;  // transformers' initializer_range (init_normal_weights)
};

class DecoderLM : public BlockModel {
 public:
  // Allocates every parameter (category weights) on `dev`, uninitialized, in Hugging Face
  // named_parameters() order. param_dtype f32, or bf16/f16 (--bf16-full, --torch-dtype,
  // generation in 16 bits; LoRA adapters added later are fp32 whatever it is). With `quant`
  // (--load-in-8bit/--load-in-4bit) the layers' Linear weights are stored quantized and frozen;
  // every GEMM dequantizes its weight into a `temporary`.
  DecoderLM(const DecoderLMSpec& spec, Device& dev, DType param_dtype = DType::f32,
            const std::optional<WeightQuantConfig>& quant = std::nullopt);
  ~DecoderLM() override;

  const DecoderLMSpec& spec() const { return spec_; }

  // tokens, targets: (B,T) host arrays; targets < 0 are ignored (HF's -100). T <= the model's
  // positions. Returns the mean cross-entropy over the valid targets (0 on meta). With
  // targets == nullptr only the logits are computed and kept (see logits()). Saves what
  // backward needs unless `for_backward` is false. `loss_scale` must be the value the following
  // backward() gets: with chunked logits the head's gradient is computed during forward.
  float forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                bool for_backward = true, float loss_scale = 1.0f) override;
  // (B,T,V) logits of the last forward without targets (probabilities when targets were given).
  const Tensor& logits() const override;
  void backward(float loss_scale = 1.0f) override;

  // Packed sequences: position ids (B,T) for the forwards that follow (each document restarting
  // at 0: attention within documents, rotary by these positions; nn/attention.h). Empty: every
  // row t is position t. Checked against each forward's B, T; not with learned positions yet.
  void set_position_ids(std::vector<int32_t> ids) override { position_ids_ = std::move(ids); }
  // Every block runs through the gatherer (ZeRO stage 3): the embeddings, each layer (in forward,
  // in a recomputed segment and in backward) and the head.
  std::string parameter_gathering_unsupported() const override { return {}; }
  std::string position_ids_unsupported() const override {
    return spec_.positions_name.empty()
               ? std::string()
               : spec_.name + " has learned positions (" + spec_.positions_name + ")";
  }

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

 protected:
  // transformers' _init_weights for the modules of a DecoderLM without a family rule of its own:
  // every weight of an nn.Linear or nn.Embedding (and an untied head) drawn from
  // normal(0, std) in parameters() order, every bias 0, every norm weight 1 (the norms named by
  // the spec). Deterministic for a seed on every platform; no-op values on meta.
  void init_normal_weights(uint64_t seed, float std);

 private:
  struct Saved;
  void drop_saved() override;
  void apply_attention(AttentionImpl a) override;
  // The head's weight (the GEMM weights that get 16-bit compute copies, before the layers').
  std::vector<const Parameter*> head_gemm_weights() const override;
  // Runs layer l on its input, keeping its output in outs[l] (its parameters acquired around it).
  void layer_forward(size_t l, Saved& s);
  // ZeRO stage 3: the head block's parameters acquired (true) or released (models/param_gather.h).
  void head_block(bool acquiring);

  DecoderLMSpec spec_;
  // Blocks are built in the constructor's body, once the store knows the parameter dtype and
  // which weights are quantized.
  std::optional<nn::Embedding> embed_;
  std::vector<nn::DecoderLayer> layers_;
  std::optional<nn::Norm> norm_;
  std::pair<size_t, size_t> norm_params_;
  std::optional<nn::LMHeadLoss> head_;
  std::unique_ptr<Saved> saved_;
  std::vector<int32_t> position_ids_;
};

}  // namespace snug

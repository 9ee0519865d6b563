// The one interface every model family implements, and the only one the Trainer, checkpoints,
// PEFT export and merge, and reports see (issue 16; docs/design.md). A family lives in its own
// folder of src/models/ and is composed of src/nn/ blocks; nothing outside that folder names it.
//
// The contract, whatever the family:
//   - parameters() in Hugging Face named_parameters() order, with the state_dict keys as names,
//     each allocated from the device's pool (category weights), gradients lazily;
//   - forward() keeps exactly what backward() needs (category activations) and backward() frees
//     it as it goes, so that a meta-device run accounts the same bytes as a cpu run;
//   - the run options of nn/run_options.h are honoured, bitwise identically where they promise
//     it (checkpoint policies recompute with the same kernels).
//
// Tasks (ModelConfig::task, --task): one interface for decoders and encoders alike; it carries
// every head a family builds through the same per-token targets (B,T), -100 ignored:
//   causal-lm                targets[b,t] = the next token (the data loader shifts them);
//   masked-lm                targets[b,t] = the original token at masked positions, -100
//                            elsewhere (data/collator.h); the loss is the mean over those;
//   sequence-classification  one label per row in column 0 (targets[b*T] in [0, num_labels)),
//                            every other entry -100; the loss is the mean over the rows.
// last_valid_targets() counts what the loss averages over (tokens, or rows), so gradient
// accumulation normalizes every task the same way. logits() is (B,T,V), or (B,num_labels).
//
// Lifecycle of one training micro-step:
//   float loss = model.forward(tokens, targets, B, T);  // saves activations
//   model.backward(scale);   // accumulates scale * dLoss/dparam into each Parameter::grad
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "kernels/gemm_path.h"
#include "models/grad_ready.h"
#include "models/param_gather.h"
#include "nn/kv_cache.h"
#include "nn/lora.h"
#include "nn/parameter.h"
#include "nn/run_options.h"

namespace snug {

// What a model is trained for (defined in models/model_config.h; see "Tasks" above).
enum class ModelTask : int;

// The shape a report and a run record show, in the names snug's report JSON has always used.
struct ModelSummary {
  std::string name;        // as resolved: preset or config path, with overrides
  std::string model_type;  // Hugging Face model_type ("gpt2")
  int64_t n_layer = 0;     // transformer blocks
  int64_t n_embd = 0;      // hidden size
  int64_t n_head = 0;      // attention (query) heads
  int64_t vocab_size = 0;
  int64_t n_positions = 0;  // maximum context
};

class Model {
 public:
  virtual ~Model() = default;

  virtual ModelSummary summary() const = 0;
  virtual Device& device() const = 0;
  // Every parameter in Hugging Face named_parameters() order (adapters after the base).
  virtual const ParameterList& parameters() const = 0;
  // nullptr when no parameter has that name.
  virtual Parameter* find(const std::string& name) const = 0;
  // The family's initialization as in transformers' _init_weights; deterministic for a seed on
  // every platform. On meta the values are made and dropped (the op table has no storage to
  // write), so a dry run may skip it.
  virtual void init_weights(uint64_t seed) = 0;
  // Metadata a safetensors file of this model's weights carries (what transformers writes).
  virtual std::map<std::string, std::string> weights_metadata() const = 0;

  // tokens, targets: (B,T) host arrays; targets < 0 are ignored (HF's -100). Returns the mean
  // cross-entropy over the valid targets (0 on meta). With targets == nullptr only the logits are
  // computed and kept. Saves what backward needs unless `for_backward` is false. `loss_scale`
  // must be the value the following backward() gets (a chunked LM head produces its gradient
  // during forward).
  virtual float forward(const int32_t* tokens, const int32_t* targets, int64_t B, int64_t T,
                        bool for_backward = true, float loss_scale = 1.0f) = 0;
  // Number of valid (non-ignored) targets in the last forward.
  virtual int64_t last_valid_targets() const = 0;
  // (B,T,V) logits of the last forward without targets.
  virtual const Tensor& logits() const = 0;
  // Accumulates loss_scale * d(mean loss)/d(param) into the gradients of parameters with
  // requires_grad; frees the saved activations.
  virtual void backward(float loss_scale = 1.0f) = 0;
  virtual void free_activations() = 0;
  // Frees every parameter gradient (zero_grad(set_to_none=True)).
  virtual void zero_grad() = 0;

  // Run options (nn/run_options.h, kernels/gemm_path.h); set before forward.
  virtual void set_attention(AttentionImpl a) = 0;
  virtual AttentionImpl attention() const = 0;
  virtual void set_logits_mode(LogitsMode m) = 0;
  virtual LogitsMode logits_mode() const = 0;
  virtual void set_checkpointing(const CheckpointConfig& c) = 0;
  virtual const CheckpointConfig& checkpointing() const = 0;
  virtual void set_compute_dtype(ComputeDType d) = 0;
  virtual ComputeDType compute_dtype() const = 0;
  virtual void set_gemm_path(kernels::GemmPath p) = 0;
  virtual kernels::GemmPath gemm_path() const = 0;
  // Floats of scratch the chunked LM head may use (kernels::lm_head_default_chunk's budget).
  virtual void set_lm_head_budget(int64_t floats) = 0;
  // Parameters that get a 16-bit compute copy under --fp16/--bf16.
  virtual int64_t num_compute_copy_params() const = 0;
  // Storage dtype of the parameters: f32, or bf16 under --bf16-full.
  virtual DType param_dtype() const = 0;
  // Grad-ready listeners (models/grad_ready.h: optimizer-in-backward, data-parallel buckets):
  // backward hands each parameter that trains to every listener as soon as its gradient is final
  // for this backward. Listening changes neither the numbers nor the memory of a backward. The
  // order parameters become ready in is the family's, documented with it (DecoderLM: the final
  // norm, then the layers from the last to the first, the embeddings last; the head weight where
  // set_head_grad_last says); the same for every backward of a run.
  virtual GradReadyId add_grad_ready_listener(GradReadyListener listener) = 0;
  virtual void remove_grad_ready_listener(GradReadyId id) = 0;
  // The micro-batch (m of n, 0-based) the following backwards belong to, which listeners are told:
  // whoever drives backward over an accumulation window says (accumulate_gradients, the fused
  // step). 0 of 1 until set.
  virtual void set_micro_batch(int64_t m, int64_t n) = 0;
  // Off (the default): a chunked LM head produces its weight's gradient during forward, with the
  // loss, and hands it over right after the final norm's. On: forward keeps the head's input
  // instead, and the weight's gradient is computed at the end of backward (the logits recomputed
  // chunk by chunk, the same kernel and sums): live only from then on, which optimizer-in-backward
  // asks for (train/fused_step.h) so that at most one block's gradients exist at a time. A
  // family whose head computes its gradient in backward anyway (full logits) ignores it.
  virtual void set_head_grad_last(bool on) = 0;
  virtual bool head_grad_last() const = 0;
  // ZeRO stage 3 (models/param_gather.h): the gatherer each block's parameters are asked of
  // before the block runs and given back to after it (null: none, the parameters are whole).
  // "" when the family runs its blocks through one; otherwise why not.
  virtual void set_parameter_gatherer(ParameterGatherer* g) = 0;
  virtual std::string parameter_gathering_unsupported() const = 0;
  // Packed sequences (--packing): position ids (B,T) for the forwards that follow, each document
  // restarting at 0, so attention stays within documents (rotary by these positions). Empty:
  // row t is position t.
  virtual void set_position_ids(std::vector<int32_t> ids) = 0;
  // "" when the model takes position ids; otherwise why it cannot (e.g. learned positions).
  virtual std::string position_ids_unsupported() const = 0;
  // NEFTune noise alpha while training (0 = off).
  virtual void set_neftune_noise_alpha(double alpha) = 0;
  // Training forwards so far: keys the random draws (dropout masks, NEFTune noise) so that a
  // resumed run draws the same.
  virtual void set_forward_count(uint64_t n) = 0;
  // Data parallelism: the row of the global batch this process's batches start at (rank * B),
  // so that the random draws keyed by element (dropout masks, NEFTune noise) are those one
  // process draws for these rows (nn/run_context.h). 0, the default, in one process.
  virtual void set_first_row(int64_t row) = 0;

  // The head this model was built with (ModelConfig::task); causal_lm unless a family says.
  virtual ModelTask task() const;

  // LoRA (nn/lora.h): adapters on every Linear `cfg` targets; every other parameter frozen but
  // the modules PEFT keeps trainable for the task (peft_modules_to_save, models/model_config.h).
  virtual void add_lora(const LoraConfig& cfg, uint64_t seed) = 0;
  virtual const std::vector<LoraAdapter>& lora_adapters() const = 0;
  virtual const LoraConfig& lora_config() const = 0;
  // The weight PEFT's merge_and_unload writes for adapter `a`, in the base's layout (host memory,
  // cpu device only).
  virtual std::vector<float> merged_weight(const LoraAdapter& a) const = 0;
  // A quantized base dequantizes to bf16 before its GEMMs (bnb_4bit_compute_dtype bf16).
  virtual void set_dequant_bf16(bool on) = 0;
  // fp32 values of any parameter (dequantized, widened) into `out` (p.numel() floats, host).
  virtual void read_values(const Parameter& p, float* out) const = 0;

  // Generation (nn/kv_cache.h). The cache this model's forward_cached needs; throws for a model
  // that cannot generate.
  virtual nn::KVCacheShape kv_cache_shape() const;
  // Inference forward of T new tokens (B,T) (host) after the cache's cache.len() rows: appends
  // their keys and values to `cache`, advances it, and returns the logits of each row's last
  // token, (B, V) fp32 on the model's device. Keeps nothing else.
  virtual Tensor forward_cached(const int32_t* tokens, int64_t B, int64_t T, nn::KVCache& cache);
};

// A grad-ready listener subscribed for this object's lifetime.
class GradReadySubscription {
 public:
  GradReadySubscription(Model& model, GradReadyListener listener)
      : model_(&model), id_(model.add_grad_ready_listener(std::move(listener))) {}
  ~GradReadySubscription() {
    if (model_) model_->remove_grad_ready_listener(id_);
  }
  GradReadySubscription(GradReadySubscription&& o) noexcept : model_(o.model_), id_(o.id_) {
    o.model_ = nullptr;
  }
  GradReadySubscription(const GradReadySubscription&) = delete;
  GradReadySubscription& operator=(const GradReadySubscription&) = delete;
  GradReadySubscription& operator=(GradReadySubscription&&) = delete;

 private:
  Model* model_;
  GradReadyId id_;
};

}  // namespace snug

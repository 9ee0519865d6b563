// How a model built from blocks computes in this run: one object per model (its ParameterStore
// owns it), read by every block, so that mixed precision, bf16 parameters, quantized base
// weights, LoRA dropout and NEFTune are written once for every family instead of per model.
//
// What it holds:
//   - the run options that change arithmetic: compute dtype (fp32 / fp16 / bf16 autocast), the
//     bf16 GEMM path (kernels/gemm_path.h), bnb's bf16 compute dtype for quantized weights;
//   - the 16-bit compute copies of the GEMM weights, cast once per forward (torch.autocast's
//     cache): category weights, alive from forward to the end of backward (in generation, from
//     the prefill to the end of the generation: models/decoder_lm.h forward_cached);
//   - --bf16-full's fp32 gradient accumulators (category temporary), rounded into the bf16
//     gradients by flush_grads() after the block that produced them;
//   - the training-forward state that keys random draws (LoRA dropout, NEFTune).
//
// Mixed precision storage (docs/mixed-precision.md): under fp16/bf16 a block allocates the
// tensors a 16-bit GEMM, attention or activation would produce with work() (fp32 `temporary`),
// rounds them with round_half(), and after the layer the model compact()s the saved ones into
// 16-bit `activations`; backward widen()s them back into fp32 temporaries. In fp32 work() is an
// activation and every rounding or conversion here is a no-op.
//
// Nothing here asks which device runs: conversions go through the device's op table (no-ops on
// meta) and every tensor is allocated on meta too, so a dry run counts the same bytes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"
#include "kernels/gemm_path.h"
#include "kernels/lm_head.h"
#include "kernels/op_table.h"
#include "nn/lora.h"
#include "nn/parameter.h"
#include "nn/run_options.h"

namespace snug::nn {

// One tensor per parameter, kept in the order they were made (they go back to the pool in that
// order, which the plan's bytes follow) and found by parameter in constant time: a GEMM asks for
// its weight's copy once per use, and a model of thousands of layers made that search quadratic
// (55% of a 4000-layer --bf16 plan).
template <class P>
class TensorPerParameter {
 public:
  // p's tensor (a handle: its values are writable through it), nullptr when p has none.
  const Tensor* find(const Parameter* p) const {
    const auto it = at_.find(p);
    return it == at_.end() ? nullptr : &items_[it->second].second;
  }
  Tensor& add(P* p, Tensor t) {
    at_.emplace(p, items_.size());
    return items_.emplace_back(p, std::move(t)).second;
  }
  std::vector<std::pair<P*, Tensor>>& items() { return items_; }
  bool empty() const { return items_.empty(); }
  void clear() {
    items_.clear();
    at_.clear();
  }

 private:
  std::vector<std::pair<P*, Tensor>> items_;
  std::unordered_map<const Parameter*, size_t> at_;
};

// fp32 view of a vector parameter (norm weight or bias, Linear bias) for a kernel argument: the
// value itself when fp32; 16-bit values (--bf16-full, --torch-dtype, generation in 16 bits)
// widened by the device's op table into a `temporary` tensor the view owns (device memory, so a
// kernel can read it wherever it runs; counted like every other byte, on meta too). nullptr for a
// null parameter (and on meta).
class VectorF32 {
 public:
  VectorF32(const Parameter* p, Device& dev);
  const float* get() const { return ptr_; }

 private:
  Tensor buf_;
  const float* ptr_ = nullptr;
};

class RunContext {
 public:
  explicit RunContext(Device& dev) : dev_(&dev) {}
  RunContext(const RunContext&) = delete;
  RunContext& operator=(const RunContext&) = delete;

  Device& device() const { return *dev_; }
  const OpTable& ops() const { return dev_->ops(); }

  // Run options (set by the model's setters).
  ComputeDType compute = ComputeDType::f32;
  kernels::GemmPath gemm_path = kernels::GemmPath::widen;
  bool dequant_bf16 = false;  // quantized weights' values rounded to bf16 (bnb compute dtype)
  bool has_lora = false;      // some Linear has an adapter (LoRA reads its inputs in fp32)
  // Some Linear has nn.Linear's (out, in) layout (every family but GPT-2). Its GEMMs take the
  // bf16 path (linear_nt_*_bf16), but its GEMM inputs are still rounded in place and widened for
  // backward as without that path: in BERT's post-norm layers the rounded norm output is also
  // the residual stream, so keeping it unrounded would change what the layers compute.
  bool has_nn_linear = false;
  // Scratch of the chunked LM head (kernels/lm_head.h: larger chunks on a GPU).
  int64_t lm_head_budget_floats = kernels::kLmHeadScratchBudgetFloats;

  // Training-forward state: set by the model at the start of each forward.
  bool training = false;       // a forward that keeps activations for backward
  uint64_t forward_count = 0;  // training forwards so far: keys dropout masks and noise
  LoraConfig lora;             // the adapters' settings (dropout, scaling)
  uint64_t lora_seed = 0;
  // Model dropout (hidden, attention probabilities): the run's seed (set by the model's
  // init_weights), keying every mask together with forward_count, the layer and the site.
  uint64_t dropout_seed = 0;
  // The key of one dropout site's mask in this training forward: counter-based, so that a
  // recomputed segment (same forward_count) and a resumed run (the Trainer sets forward_count
  // from the step) draw the same mask. layer: the model's numbering (negative for sites outside
  // the layers); site: which dropout of that layer.
  uint64_t dropout_key(int64_t layer, int site) const;
  // Data parallelism: the row of the global batch (one process's batch of every rank's rows)
  // this process's batch starts at (the Trainer's rank * B; 0 in one process), and this
  // forward's rows (set by the model). Random draws keyed by element index (model and LoRA
  // dropout, NEFTune's noise) start at that row's elements, so that each rank draws what one
  // process draws for its rows.
  int64_t first_row = 0;
  int64_t batch_rows = 1;
  // `key` (a dropout key or noise seed) for a tensor of n elements in rows of the batch (row-
  // major, the batch's rows leading: (B,T,C), (B*T,C), (B,H,T,T), (B,C)), moved to this process's
  // first row (kernels/dropout_mask.h, counter_key_at). `key` itself in one process.
  uint64_t at_first_row(uint64_t key, int64_t n) const;
  // Position ids (B,T) int32 of this forward's batch (input_data): packed documents, each
  // restarting at 0, attend only within themselves and rotate by these positions (nn/attention.h).
  // Undefined: every row t is position t of one sequence. Set by the model before its layers run.
  Tensor position_ids;

  bool low_precision() const { return compute != ComputeDType::f32; }
  bool fp16() const { return compute == ComputeDType::f16; }

  // --- activations under mixed precision ---
  // A tensor a 16-bit op would produce: fp32 `activations`, or fp32 `temporary` under mixed
  // precision (compact() turns the saved ones into 16-bit activations).
  Tensor work(const Shape& shape) const;
  // t = its 16-bit value, in place (no-op in fp32).
  void round_half(const Tensor& t) const;
  // The input of a Linear GEMM: rounded, unless the bf16 GEMM path reads it (packing rounds it
  // the same way) and backward keeps it in bf16 (gemm_inputs_stay_bf16).
  void round_gemm_input(const Tensor& t) const {
    if (!gemm_inputs_stay_bf16()) round_half(t);
  }
  // Under the bf16 GEMM path without LoRA the GEMM inputs are read only by gemm_bf16: backward
  // keeps them in bf16 (widen leaves them).
  bool gemm_inputs_stay_bf16() const;
  // fp32 work tensors -> 16-bit activations, in order (no-op in fp32, for undefined or 16-bit
  // tensors).
  void compact(std::initializer_list<Tensor*> ts) const;
  // 16-bit activations -> fp32 temporaries for backward, in order; GEMM-only inputs stay bf16
  // when gemm_inputs_stay_bf16(). No-op in fp32.
  void widen(std::initializer_list<Tensor*> ts, bool gemm_inputs) const;
  // A bf16 temporary of t's values rounded to nearest even (t itself when already bf16).
  Tensor to_bf16(const Tensor& t) const;
  // The gradient a 16-bit GEMM receives for its output: g itself in fp32, else a rounded copy
  // (bf16 on the bf16 GEMM path when nothing reads it in fp32: no LoRA bypass, and a GEMM that
  // takes bf16 operands); g stays fp32.
  Tensor half_grad(const Tensor& g, const Parameter* w, bool fp32_reader) const;

  // --- weights ---
  // 16-bit copies of `weights` for this forward (no-op in fp32, with bf16 parameters, and for
  // quantized weights, which are dequantized per use). free_compute_weights() drops them.
  void cast_compute_weights(const std::vector<const Parameter*>& weights);
  void free_compute_weights() { compute_weights_.clear(); }
  // Whether cast_compute_weights() made copies that are still held.
  bool has_compute_weights() const { return !compute_weights_.empty(); }
  // Whether GEMMs with weight p run on gemm_bf16 (kernels/gemm_path.h).
  bool bf16_gemm(const Parameter* p) const;
  // fp32 values of GEMM weight p as the compute precision sees them: p's own values in fp32,
  // else its compute copy, 16-bit values or dequantized values widened into `scratch`
  // (temporary). nullptr on meta.
  const float* gemm_weight(const Parameter* p, Tensor& scratch) const;
  // bf16 values of GEMM weight p for gemm_bf16: its compute copy or bf16 values, or (quantized)
  // its dequantized values packed into `scratch` (temporary). nullptr on meta.
  const uint16_t* gemm_weight16(const Parameter* p, Tensor& scratch) const;
  // fp32 values of any parameter: the value itself when fp32, else (bf16 or f16) widened into
  // `scratch`, an fp32 temporary. nullptr on meta.
  const float* param_f32(const Parameter* p, Tensor& scratch) const;
  VectorF32 vector_f32(const Parameter* p) const { return VectorF32(p, *dev_); }

  // --- gradients ---
  // Where backward accumulates p's gradient in fp32, nullptr when p is null or frozen (its dW
  // work is skipped): p's own gradient (fp32 parameters, allocated zeroed on first use), else a
  // temporary accumulator that flush_grads() rounds into p's bf16 gradient (f16 parameters do
  // not train: an error). nullptr on meta.
  float* grad(Parameter* p);
  void flush_grads();

  // Drops the compute copies and any accumulator (after backward, or a forward without one).
  void clear() {
    free_compute_weights();
    grad_acc_.clear();
  }

 private:
  DType storage_dtype() const { return fp16() ? DType::f16 : DType::bf16; }

  Device* dev_;
  TensorPerParameter<const Parameter> compute_weights_;
  TensorPerParameter<Parameter> grad_acc_;  // bf16 parameters: fp32 accumulators
};

}  // namespace snug::nn

#include "models/block_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/random.h"
#include "io/excerpt.h"
#include "models/model_config.h"
#include "nn/param_fill.h"
#include "quant/weight_quant.h"

namespace snug {

BlockModel::BlockModel(Device& dev, std::string name, std::string layer_prefix,
                       std::string phase_label, AttentionImpl attention, LogitsMode logits)
    : dev_(&dev),
      ps_(dev),
      name_(std::move(name)),
      layer_prefix_(std::move(layer_prefix)),
      phase_label_(std::move(phase_label)),
      attention_(attention),
      logits_(logits) {}

BlockModel::~BlockModel() = default;

void BlockModel::add_layer(size_t begin, size_t end, std::vector<nn::Linear*> linears) {
  layer_params_.emplace_back(begin, end);
  linears_.push_back(std::move(linears));
}

void BlockModel::free_activations() {
  drop_saved();
  ctx().clear();
}

void BlockModel::set_attention(AttentionImpl a) {
  attention_ = a;
  apply_attention(a);
}

void BlockModel::set_checkpointing(const CheckpointConfig& c) {
  SNUG_CHECK(c.policy == CheckpointPolicy::none || c.policy == CheckpointPolicy::selective ||
                 c.every_k >= 1,
             "gradient checkpointing: segment length must be >= 1, got ", c.every_k);
  ckpt_ = c;
}

std::vector<const Parameter*> BlockModel::gemm_weights() const {
  std::vector<const Parameter*> w = head_gemm_weights();
  for (const auto& layer : linears_)
    for (const nn::Linear* lin : layer) w.push_back(lin->weight());
  return w;
}

int64_t BlockModel::num_compute_copy_params() const {
  if (ps_.param_dtype() != DType::f32) return 0;  // --bf16-full: the parameters are the copies
  int64_t n = 0;
  for (const Parameter* p : gemm_weights())
    if (!p->quantized()) n += p->numel();  // quantized: dequantized per use instead
  return n;
}

void BlockModel::check_tokens(const int32_t* tokens, int64_t B, int64_t T, int64_t vocab,
                              int64_t max_positions, const std::string& positions_key) const {
  SNUG_CHECK(B > 0 && T > 0, "forward: batch ", B, " and sequence length ", T, " must be positive");
  SNUG_CHECK(T <= max_positions, "forward: sequence length ", T, " exceeds the model's ",
             max_positions, " positions (", positions_key, " of ", name_, ")");
  for (int64_t i = 0; i < B * T; ++i)
    SNUG_CHECK(tokens[i] >= 0 && tokens[i] < vocab, "forward: token id ", tokens[i],
               " at position ", i, " is outside the vocabulary [0, ", vocab, ")");
}

void BlockModel::begin_forward(SavedRun& s, int64_t B, int64_t T, bool has_targets,
                               bool for_backward) {
  s.B = B;
  s.T = T;
  s.has_targets = has_targets;
  s.for_backward = for_backward;
  nn::RunContext& c = ctx();
  c.training = for_backward;
  c.batch_rows = B;                     // RunContext::at_first_row
  if (for_backward) ++c.forward_count;  // keys this forward's dropout masks and NEFTune noise
  if (c.low_precision()) {
    dev_->pool().set_phase("forward cast weights");
    c.cast_compute_weights(gemm_weights());  // as torch.autocast: fresh copies per forward
  }
  dev_->pool().set_phase("forward embeddings");
}

Tensor BlockModel::host_ids(const int32_t* ids, const Shape& shape) const {
  Tensor t = Tensor::empty(shape, DType::i32, Category::input_data, *dev_);
  dev_->upload(t.data<int32_t>(), ids, t.numel());
  return t;
}

void BlockModel::check_backward(const SavedRun* s) {
  SNUG_CHECK(s && s->has_targets && s->for_backward,
             "backward: needs a forward pass with targets and for_backward=true before it");
}

bool BlockModel::segmented(bool for_backward) const {
  return for_backward && (ckpt_.policy == CheckpointPolicy::every_layer ||
                          ckpt_.policy == CheckpointPolicy::every_k);
}

bool BlockModel::segment_end(size_t l) const {
  if (l + 1 == layer_params_.size()) return true;
  return (l + 1) % static_cast<size_t>(ckpt_.every_k) == 0;
}

std::string BlockModel::phase(const char* what, size_t l) const {
  return detail::concat(what, " ", phase_label_, l);
}

void BlockModel::set_parameter_gatherer(ParameterGatherer* g) {
  const std::string why = parameter_gathering_unsupported();
  SNUG_CHECK(g == nullptr || why.empty(), why);
  gatherer_ = g;
}

std::string BlockModel::parameter_gathering_unsupported() const {
  return name_ +
         " does not gather its blocks' parameters (ZeRO stage 3 runs decoder LMs: "
         "Llama, GPT-2, GPT-NeoX)";
}

void BlockModel::acquire(Parameter* p) {
  if (gatherer_ != nullptr && p != nullptr) gatherer_->acquire(*p);
}

void BlockModel::release(Parameter* p) {
  if (gatherer_ != nullptr && p != nullptr) gatherer_->release(*p);
}

void BlockModel::acquire_range(size_t begin, size_t end) {
  if (gatherer_ == nullptr) return;
  const ParameterList& list = ps_.list();
  gatherer_->acquire(std::vector<Parameter*>(list.begin() + static_cast<std::ptrdiff_t>(begin),
                                             list.begin() + static_cast<std::ptrdiff_t>(end)));
}

void BlockModel::release_range(size_t begin, size_t end) {
  if (gatherer_ == nullptr) return;
  for (size_t i = begin; i < end; ++i) gatherer_->release(*ps_.list()[i]);
}

void BlockModel::acquire_layer(size_t l) {
  if (gatherer_ == nullptr) return;
  // The layer's parameters and its adapters in one request: one collective for the block.
  const ParameterList& list = ps_.list();
  std::vector<Parameter*> ps(list.begin() + static_cast<std::ptrdiff_t>(layer_params_[l].first),
                             list.begin() + static_cast<std::ptrdiff_t>(layer_params_[l].second));
  for (const nn::Linear* lin : linears_[l])
    if (const LoraAdapter* ad = lin->lora()) {
      if (ad->A != nullptr) ps.push_back(ad->A);
      if (ad->B != nullptr) ps.push_back(ad->B);
    }
  gatherer_->acquire(ps);
}

void BlockModel::release_layer(size_t l) {
  if (gatherer_ == nullptr) return;
  release_range(layer_params_[l].first, layer_params_[l].second);
  for (const nn::Linear* lin : linears_[l])
    if (const LoraAdapter* ad = lin->lora()) {
      release(ad->A);
      release(ad->B);
    }
}

void BlockModel::ready(Parameter* p) {
  grad_ready_.notify(*p);
}

void BlockModel::ready_range(size_t begin, size_t end) {
  const ParameterList& list = ps_.list();
  for (size_t i = begin; i < end; ++i) ready(list[i]);
}

void BlockModel::layer_ready(size_t l) {
  ready_range(layer_params_[l].first, layer_params_[l].second);
  for (const nn::Linear* lin : linears_[l])
    if (const LoraAdapter* ad = lin->lora()) {
      ready(ad->A);
      ready(ad->B);
    }
}

void BlockModel::add_lora(const LoraConfig& cfg, uint64_t seed) {
  cfg.validate();
  SNUG_CHECK(lora_.empty(), "add_lora: the model has LoRA adapters already");
  // Every key must adapt something (a typo must not silently train nothing).
  for (const std::string& key : cfg.target_modules) {
    bool hit = false;
    for (const auto& layer : linears_)
      for (const nn::Linear* lin : layer) hit = hit || lora_target_matches({key}, lin->name());
    if (hit) continue;
    std::string names;
    const std::string first = layer_prefix_ + "0.";
    for (const nn::Linear* lin : linears_.front())
      names += (names.empty() ? "" : ", ") + lin->name().substr(first.size());
    throw Error(detail::concat("--target-modules: '", excerpt(key), "' matches no Linear of ",
                               name_, " (its layers' Linears are ", names, "; or all-linear)"));
  }
  // PEFT: the base is frozen, but for the task's modules_to_save (a classifier initialized for
  // this task has to learn too), which stay trainable in full.
  const std::vector<std::string>& keep = peft_modules_to_save(task());
  for (Parameter* p : ps_.list()) {
    const std::string module = p->name.substr(0, p->name.rfind('.'));
    p->requires_grad = std::find(keep.begin(), keep.end(), module) != keep.end();
  }
  nn::RunContext& c = ctx();
  c.lora = cfg;
  c.lora_seed = seed;
  dev_->pool().set_phase("init lora");
  SplitMix64 rng(splitmix64_mix(seed ^ 0x4c6f526131ull));
  for (size_t l = 0; l < linears_.size(); ++l)
    for (size_t slot = 0; slot < linears_[l].size(); ++slot) {
      nn::Linear& lin = *linears_[l][slot];
      if (!lora_target_matches(cfg.target_modules, lin.name())) continue;
      const LoraAdapter& ad =
          lin.add_lora(ps_, cfg.r, static_cast<int64_t>(l), static_cast<int>(slot));
      // kaiming_uniform_(a=sqrt(5)) on (r, in): bound = gain * sqrt(3 / in), gain =
      // sqrt(2 / (1 + 5)), i.e. 1/sqrt(in). B = 0: the adapted model starts as the base.
      const int64_t in = lin.in_features();
      const double bound = 1.0 / std::sqrt(static_cast<double>(in));
      std::vector<float> a(static_cast<size_t>(ad.A->value.numel()));
      for (float& v : a) v = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
      dev_->upload(ad.A->value.data<float>(), a.data(), ad.A->value.numel());
      ad.B->value.zero_();
      lora_.push_back(ad);
    }
  c.has_lora = !lora_.empty();
}

std::vector<float> BlockModel::merged_weight(const LoraAdapter& a) const {
  return linears_[static_cast<size_t>(a.layer)][static_cast<size_t>(a.slot)]->merged_weight();
}

void BlockModel::read_values(const Parameter& p, float* out) const {
  nn::read_values(p, out);
}

}  // namespace snug

#include "plan/estimate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/device.h"
#include "core/error.h"
#include "core/memory.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "optim/optimizer.h"
#include "optim/registry.h"
#include "quant/weight_quant.h"
#include "train/freeze.h"
#include "train/model_setup.h"

namespace snug {

namespace {

int64_t at(const ByCategory& b, Category c) {
  return b[static_cast<int>(c)];
}

// 16-bit activations: --fp16, --bf16, --bf16-full and a 16-bit --torch-dtype.
bool mixed_precision(const TrainingArguments& a) {
  return a.compute_dtype() != ComputeDType::f32;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

int64_t MemoryEstimate::total() const {
  int64_t t = 0;
  for (int64_t b : bytes) t += b;
  return t;
}

int64_t MemoryEstimate::model_states() const {
  return at(bytes, Category::weights) + at(bytes, Category::gradients) +
         at(bytes, Category::optimizer_state);
}

int64_t korthikanti_activation_bytes(const TrainingArguments& args) {
  const ModelConfig cfg = args.model_config();
  const int64_t s = args.seq_len, b = args.per_device_train_batch_size, h = cfg.shape.n_embd;
  const int64_t L = cfg.shape.n_layer, v = cfg.shape.vocab_size;
  const int64_t e = mixed_precision(args) ? 2 : 4;
  const int64_t sbh = s * b * h;
  const bool flash = parse_attention_impl(args.attention) == AttentionImpl::flash;
  CheckpointConfig ck;
  if (args.gradient_checkpointing) ck = parse_checkpoint_policy(args.checkpoint_policy, L);
  const bool drop_scores = flash || ck.policy == CheckpointPolicy::selective;
  const int64_t layer =
      architecture(cfg.shape.model_type).layer_activation_bytes(cfg, s, b, e, !drop_scores);
  int64_t body = 0;
  if (ck.policy == CheckpointPolicy::every_layer || ck.policy == CheckpointPolicy::every_k) {
    const int64_t k =
        ck.policy == CheckpointPolicy::every_layer ? 1 : std::max<int64_t>(1, ck.every_k);
    body = (L + k - 1) / k * e * sbh + std::min(k, L) * layer;
  } else {
    body = L * layer;
  }
  const int64_t head = parse_logits_mode(args.logits) == LogitsMode::full ? 4 * s * b * v : 0;
  return body + head;
}

MemoryEstimate estimate_memory(const TrainingArguments& args) {
  const ModelConfig cfg = args.model_config();
  // Shapes only, for the parameter list the optimizer formula and --freeze work on.
  Device shapes(meta_backend());
  const auto owned = create_model(cfg, shapes, args.param_dtype(), args.weight_quant());
  Model& model = *owned;
  prepare_model(model, args);  // LoRA adapters, --freeze
  MemoryEstimate est;
  est.params = cfg.num_params;
  est.trainable_params = count_params(model.parameters(), true);
  const int64_t P = est.params, Pt = est.trainable_params;
  auto set = [&](Category c, int64_t bytes, std::string how) {
    est.bytes[static_cast<int>(c)] = bytes;
    est.how[static_cast<int>(c)] = std::move(how);
  };

  const bool fp16 = args.compute_dtype() == ComputeDType::f16;
  if (args.param_dtype() != DType::f32)
    set(Category::weights, 2 * P,
        std::string("2 B/param (") + dtype_name(args.param_dtype()) +
            (args.master_weights() ? "; the fp32 master is optimizer_state)"
                                   : ", no fp32 master)"));
  else if (mixed_precision(args))
    set(Category::weights, 6 * P,
        std::string("6 B/param: fp32 master + ") + (fp16 ? "fp16" : "bf16") + " copy");
  else
    set(Category::weights, 4 * P, "4 B/param (fp32)");

  // A quantized base and/or LoRA adapters: count the parameters by storage instead of P.
  int64_t dense = 0, dense_bytes = 0;  // a 16-bit base's LoRA adapters are fp32
  quant::StorageBytes q{};
  for (const Parameter* p : model.parameters()) {
    if (!p->quantized()) {
      dense += p->numel();
      dense_bytes += p->numel() * static_cast<int64_t>(dtype_size(p->value.dtype()));
      continue;
    }
    const quant::StorageBytes b = weight_quant_bytes(p->numel(), p->quant->cfg);
    q.codes += b.codes;
    q.state += b.state;
  }
  if (q.total() > 0 || args.lora_r > 0) {
    const int64_t copies = mixed_precision(args) ? 2 * model.num_compute_copy_params() : 0;
    std::string how =
        fmt("%.2f", dense > 0 ? static_cast<double>(dense_bytes) / static_cast<double>(dense) : 0) +
        fmt(" B x %.2fM dense params", static_cast<double>(dense) / 1e6);
    if (copies > 0) how += " + 16-bit copies";
    if (q.total() > 0) {
      how += " + " + args.weight_quant()->describe() + " codes";
      set(Category::quant_state, q.state,
          "per-block absmax (" + args.weight_quant()->describe() + ")");
    }
    set(Category::weights, dense_bytes + copies + q.codes, how);
  }

  if (optimizer_entry(args.optim).updates_in_backward) {
    // Updated inside backward: at most the largest parameter's gradient is live.
    int64_t largest = 0;
    for (const Parameter* p : model.parameters())
      if (p->requires_grad) largest = std::max(largest, p->value.numel());
    set(Category::gradients, 4 * largest, "4 B x largest tensor (fused into backward)");
  } else if (args.sixteen_bit_training()) {
    // bf16 gradients of bf16 parameters; LoRA adapters on the bf16 base keep fp32 ones.
    int64_t bytes = 0;
    for (const Parameter* p : model.parameters())
      if (p->requires_grad) bytes += p->numel() * (p->value.dtype() == DType::bf16 ? 2 : 4);
    set(Category::gradients, bytes,
        args.lora_r > 0 ? "4 B/trainable param (fp32 adapters)" : "2 B/trainable param (bf16)");
  } else {
    set(Category::gradients, 4 * Pt, "4 B/trainable param (fp32)");
  }

  const int64_t state =
      state_bytes_formula(args.optim, model.parameters(), args.optimizer_options());
  set(Category::optimizer_state, state,
      fmt("%.2f B/trainable param", Pt > 0 ? static_cast<double>(state) / Pt : 0.0) + " (" +
          args.optim + ")");

  std::string how =
      mixed_precision(args) ? "Korthikanti sbhL(34+5as/h)" : "Korthikanti, fp32: sbhL(66+9as/h)";
  if (parse_attention_impl(args.attention) == AttentionImpl::flash) how += ", flash: no as/h";
  if (args.gradient_checkpointing) how += ", ckpt " + args.checkpoint_policy;
  if (parse_logits_mode(args.logits) == LogitsMode::full) how += ", +4sbv logits";
  set(Category::activations, korthikanti_activation_bytes(args), how);
  return est;
}

std::string estimate_table(const MemoryEstimate& est, const MemoryStats& plan) {
  std::ostringstream os;
  char buf[256];
  auto ratio = [](int64_t e, int64_t p) {
    return p > 0 ? fmt("%.3f", static_cast<double>(e) / static_cast<double>(p)) : std::string("-");
  };
  std::snprintf(buf, sizeof buf, "%-16s %12s %12s %8s  %s\n", "category", "estimate MiB",
                "plan MiB", "est/plan", "estimate's formula");
  os << buf;
  for (int i = 0; i < kNumCategories; ++i) {
    const int64_t e = est.bytes[i], p = plan.max_by_category[i];
    if (est.how[i].empty() && p == 0) continue;
    std::snprintf(buf, sizeof buf, "%-16s %12s %12.1f %8s  %s\n", category_name(category_at(i)),
                  est.how[i].empty() ? "-" : fmt("%.1f", mib(e)).c_str(), mib(p),
                  est.how[i].empty() ? "-" : ratio(e, p).c_str(),
                  est.how[i].empty() ? "not in the closed form" : est.how[i].c_str());
    os << buf;
  }
  const int64_t plan_states = at(plan.max_by_category, Category::weights) +
                              at(plan.max_by_category, Category::gradients) +
                              at(plan.max_by_category, Category::optimizer_state);
  std::snprintf(buf, sizeof buf, "%-16s %12.1f %12.1f %8s  %s\n", "model states",
                mib(est.model_states()), mib(plan_states),
                ratio(est.model_states(), plan_states).c_str(),
                "weights + gradients + optimizer_state");
  os << buf;
  std::snprintf(buf, sizeof buf, "%-16s %12.1f %12.1f %8s  %s\n", "peak", mib(est.total()),
                mib(plan.peak_total), ratio(est.total(), plan.peak_total).c_str(),
                "estimate: all four at once; plan: the dry run's peak");
  os << buf;
  os << "plan MiB: each category's own maximum in the dry run (docs/memory.md explains the "
        "differences)\n";
  return os.str();
}

nlohmann::json estimate_json(const MemoryEstimate& est, const MemoryStats& plan) {
  nlohmann::json rows = nlohmann::json::array();
  for (int i = 0; i < kNumCategories; ++i) {
    nlohmann::json r = {{"category", category_name(category_at(i))},
                        {"plan_bytes", plan.max_by_category[i]},
                        {"modelled", !est.how[i].empty()}};
    if (!est.how[i].empty()) {
      r["estimate_bytes"] = est.bytes[i];
      r["formula"] = est.how[i];
      r["ratio"] = plan.max_by_category[i] > 0
                       ? nlohmann::json(static_cast<double>(est.bytes[i]) / plan.max_by_category[i])
                       : nlohmann::json(nullptr);
    }
    rows.push_back(r);
  }
  const int64_t plan_states = at(plan.max_by_category, Category::weights) +
                              at(plan.max_by_category, Category::gradients) +
                              at(plan.max_by_category, Category::optimizer_state);
  return {{"params", est.params},
          {"trainable_params", est.trainable_params},
          {"categories", rows},
          {"model_states", {{"estimate_bytes", est.model_states()}, {"plan_bytes", plan_states}}},
          {"peak", {{"estimate_bytes", est.total()}, {"plan_bytes", plan.peak_total}}}};
}

}  // namespace snug

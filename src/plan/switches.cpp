#include "plan/switches.h"

#include <algorithm>

#include "optim/optimizer.h"
#include "optim/registry.h"

namespace snug {

namespace {

using TA = TrainingArguments;

// Off, every-layer (as Hugging Face), sqrt (about sqrt(L) checkpoints), selective (recompute
// norms, softmax and GELU only).
std::vector<Switch> checkpointing(const TA&, int64_t) {
  auto not_yet = [](const TA& run) { return !run.gradient_checkpointing; };
  std::vector<Switch> v;
  v.push_back({"", [](TA& a) { a.gradient_checkpointing = false; }, true});
  for (const char* policy : {"every-layer", "sqrt", "selective"}) {
    const std::string p = policy;
    v.push_back(
        {"--gradient-checkpointing" + (p == "every-layer" ? "" : " --checkpoint-policy " + p),
         [p](TA& a) {
           a.gradient_checkpointing = true;
           a.checkpoint_policy = p;
         },
         true, p == "sqrt" ? nullptr : std::function<bool(const TA&)>(not_yet)});
  }
  return v;
}

std::vector<Switch> attention(const TA&, int64_t) {
  return {{"--attention flash", [](TA& a) { a.attention = "flash"; }, false,
           [](const TA& run) { return run.attention != "flash"; }}};
}

std::vector<Switch> logits(const TA&, int64_t) {
  return {{"--logits chunked", [](TA& a) { a.logits = "chunked"; }, false,
           [](const TA& run) { return run.logits != "chunked"; }}};
}

// fp32; bf16 mixed precision (fp32 masters, 16-bit activations); bf16 weights, gradients and
// state (--bf16-full: the optimizers with bf16 state only; the what-if table does not offer it to
// PEFT runs, the advisor tries it there: a bf16 base under fp32 adapters, docs/lora.md). --fp16
// is not proposed: on the devices snug models it trains like --bf16 with a loss scaler, for the
// same bytes. A run that names its storage (--torch-dtype) keeps its precision: nothing else is
// offered; nor does one that names DeepSpeed's layout (--precision-layout deepspeed).
std::vector<Switch> precision(const TA& base, int64_t) {
  if (!base.torch_dtype.empty() || base.master_weights()) return {{"", [](TA&) {}, true}};
  auto set = [](bool bf16, bool bf16_full) {
    return [bf16, bf16_full](TA& a) {
      a.fp16 = false;
      a.bf16 = bf16;
      a.bf16_full = bf16_full;
    };
  };
  return {{"", set(false, false), true},
          {"--bf16", set(true, false), true,
           [](const TA& run) { return !run.fp16 && !run.bf16 && !run.bf16_full; }},
          {"--bf16-full", set(false, true), true, [](const TA& run) {
             const bool peft = run.lora_r > 0 || run.load_in_4bit || run.load_in_8bit;
             return !run.fp16 && !run.bf16_full && !peft && supports_bf16_params(run.optim);
           }}};
}

// Every split of `target_batch` sequences into micro-batch x accumulation, largest micro-batch
// first. The what-if table tries halving the run's micro-batch (twice the accumulation).
std::vector<Switch> batch_split(const TA&, int64_t target_batch) {
  std::vector<Switch> v;
  for (int64_t b = target_batch; b >= 1; --b) {
    if (target_batch % b != 0) continue;
    const int64_t g = target_batch / b;
    v.push_back({"--per-device-train-batch-size " + std::to_string(b) +
                     " --gradient-accumulation-steps " + std::to_string(g),
                 [b, g](TA& a) {
                   a.per_device_train_batch_size = b;
                   a.gradient_accumulation_steps = g;
                 },
                 true,
                 [b](const TA& run) {
                   const int64_t B = run.per_device_train_batch_size;
                   return B > 1 && B % 2 == 0 && b == B / 2;
                 }});
  }
  return v;
}

// PEFT: adapters instead of full fine-tuning. The what-if table shows what they would save; the
// advisor does not offer them to a full fine-tuning run (that would change what it trains).
std::vector<Switch> adapters(const TA&, int64_t) {
  return {{"--lora-r 8 --target-modules all-linear",
           [](TA& a) {
             a.lora_r = 8;
             a.target_modules = "all-linear";
           },
           false,
           [](const TA& run) {
             return run.lora_r == 0 && !run.sixteen_bit_training() && !run.load_in_4bit &&
                    !run.load_in_8bit;
           }}};
}

// A LoRA run's frozen base in fp32, int8, or 4-bit NF4 with double quantization (QLoRA); the
// run's own first, so that among equal step times (dequantization is not counted) the advice
// keeps the storage the run asked for.
std::vector<Switch> base_storage(const TA& base, int64_t) {
  const bool lora = base.lora_r > 0;
  // A base that is not 4-bit is no longer the QLoRA recipe (which requires one).
  auto storage = [](bool int8, bool four) {
    return [int8, four](TA& a) {
      a.load_in_8bit = int8;
      a.load_in_4bit = four;
      if (four) {
        a.bnb_4bit_quant_type = "nf4";
        a.bnb_4bit_use_double_quant = true;
      } else {
        a.qlora = false;
      }
    };
  };
  std::vector<Switch> v = {
      {"", storage(false, false), lora},
      {"--load-in-8bit", storage(true, false), lora},
      {"--load-in-4bit --bnb-4bit-quant-type nf4 --bnb-4bit-use-double-quant", storage(false, true),
       lora, [](const TA& run) { return run.lora_r > 0 && !run.load_in_4bit; }}};
  const size_t own = base.load_in_4bit ? 2 : base.load_in_8bit ? 1 : 0;
  std::rotate(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(own),
              v.begin() + static_cast<std::ptrdiff_t>(own) + 1);
  return v;
}

// The optimizer registry orders each proposal itself (optim/registry.h): the advisor's choices
// are the run's own optimizer, then advisor_rank order (the closest to AdamW's results first);
// the what-if rows are what_if_rank order, without the run's own.
std::vector<Switch> optimizers(const TA& base, int64_t) {
  auto use = [](const char* name) { return [name](TA& a) { a.optim = name; }; };
  std::vector<Switch> v;
  const OptimizerEntry* own = find_optimizer(base.optim);
  if (own) v.push_back({std::string("--optim ") + own->name, use(own->name), true});
  for (const OptimizerEntry* e : advisor_optimizers())
    if (e != own) v.push_back({std::string("--optim ") + e->name, use(e->name), true});
  for (const OptimizerEntry* e : what_if_optimizers())
    v.push_back({std::string("--optim ") + e->name, use(e->name), false, [e](const TA& run) {
                   return e != find_optimizer(run.optim) && (!run.bf16_full || e->bf16_params) &&
                          (!run.master_weights() || e->master_weights);
                 }});
  return v;
}

}  // namespace

const std::vector<SwitchGroup>& switch_groups() {
  static const std::vector<SwitchGroup> groups = {
      {"checkpointing", 2, checkpointing},
      {"attention", 0, attention},
      {"logits", 0, logits},
      {"precision", 4, precision},
      {"batch x accumulation", 1, batch_split},
      {"adapters", 0, adapters},
      {"base storage", 5, base_storage},
      {"optimizer", 3, optimizers},
  };
  return groups;
}

}  // namespace snug

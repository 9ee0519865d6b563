#include "train/what_if.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "core/device.h"
#include "models/registry.h"
#include "optim/optimizer.h"
#include "optim/registry.h"
#include "train/trainer.h"

namespace snug {

MemoryStats dry_run(const TrainingArguments& args, std::vector<MemoryEvent>* timeline) {
  TrainingArguments a = args;
  a.device = "meta";
  a.max_steps = 2;
  a.report_json.clear();
  Device dev(DeviceKind::meta);
  dev.pool().enable_timeline(timeline != nullptr);
  const auto model = create_model(a.model_config(), dev, a.param_dtype(), a.weight_quant());
  Trainer trainer(a, *model, nullptr);
  const TrainResult r = trainer.train();
  SNUG_CHECK(r.error.empty(), "dry run failed: ", r.error);
  if (timeline) *timeline = dev.pool().timeline();
  return dev.pool().stats();
}

std::vector<WhatIf> what_if(const TrainingArguments& args) {
  std::vector<std::pair<std::string, TrainingArguments>> variants;
  auto add = [&](const std::string& flags, auto&& change) {
    TrainingArguments a = args;
    change(a);
    variants.emplace_back(flags, a);
  };
  if (!args.gradient_checkpointing) {
    add("--gradient-checkpointing", [](TrainingArguments& a) {
      a.gradient_checkpointing = true;
      a.checkpoint_policy = "every-layer";
    });
    add("--gradient-checkpointing --checkpoint-policy selective", [](TrainingArguments& a) {
      a.gradient_checkpointing = true;
      a.checkpoint_policy = "selective";
    });
  }
  if (args.attention != "flash")
    add("--attention flash", [](TrainingArguments& a) { a.attention = "flash"; });
  if (args.logits != "chunked")
    add("--logits chunked", [](TrainingArguments& a) { a.logits = "chunked"; });
  if (!args.fp16 && !args.bf16 && !args.bf16_full)
    add("--bf16", [](TrainingArguments& a) { a.bf16 = true; });
  const bool peft = args.lora_r > 0 || args.load_in_4bit || args.load_in_8bit;
  if (!args.fp16 && !args.bf16_full && !peft && supports_bf16_params(args.optim))
    add("--bf16-full", [](TrainingArguments& a) { a.bf16_full = true; });
  if (args.per_device_train_batch_size > 1 && args.per_device_train_batch_size % 2 == 0) {
    const int64_t b = args.per_device_train_batch_size / 2;
    const int64_t g = args.gradient_accumulation_steps * 2;
    add("--per-device-train-batch-size " + std::to_string(b) + " --gradient-accumulation-steps " +
            std::to_string(g),
        [&](TrainingArguments& a) {
          a.per_device_train_batch_size = b;
          a.gradient_accumulation_steps = g;
        });
  }
  // PEFT: adapters instead of full fine-tuning; a 4-bit base under the adapters (QLoRA).
  if (args.lora_r == 0 && !args.bf16_full && !args.load_in_4bit && !args.load_in_8bit)
    add("--lora-r 8 --target-modules all-linear", [](TrainingArguments& a) {
      a.lora_r = 8;
      a.target_modules = "all-linear";
    });
  if (args.lora_r > 0 && !args.load_in_4bit)
    add("--load-in-4bit --bnb-4bit-quant-type nf4 --bnb-4bit-use-double-quant",
        [](TrainingArguments& a) {
          a.load_in_8bit = false;
          a.load_in_4bit = true;
          a.bnb_4bit_quant_type = "nf4";
          a.bnb_4bit_use_double_quant = true;
        });
  // The registry's memory-saving alternatives (what_if_rank, optim/registry.h).
  const OptimizerEntry* own = find_optimizer(args.optim);
  for (const OptimizerEntry* e : what_if_optimizers())
    if (e != own && (!args.bf16_full || e->bf16_params))
      add(std::string("--optim ") + e->name, [e](TrainingArguments& a) { a.optim = e->name; });

  std::vector<WhatIf> rows;
  for (const auto& [flags, a] : variants) {
    try {
      rows.push_back({flags, dry_run(a).peak_total});
    } catch (const OutOfMemoryError&) {
      throw;
    } catch (const Error&) {
      // A combination this run's other flags rule out (e.g. an optimizer that refuses them):
      // not an alternative, so not a row.
    }
  }
  return rows;
}

std::string what_if_table(const std::vector<WhatIf>& rows, int64_t baseline_peak) {
  std::ostringstream os;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-62s %12s %12s\n", "what if you add", "peak MB", "saves MB");
  os << buf;
  for (const WhatIf& w : rows) {
    std::snprintf(buf, sizeof buf, "%-62s %12.1f %12.1f\n", w.flags.c_str(),
                  static_cast<double>(w.peak_bytes) / (1024.0 * 1024.0),
                  static_cast<double>(baseline_peak - w.peak_bytes) / (1024.0 * 1024.0));
    os << buf;
  }
  return os.str();
}

nlohmann::json what_if_json(const std::vector<WhatIf>& rows, int64_t baseline_peak) {
  nlohmann::json j = nlohmann::json::array();
  for (const WhatIf& w : rows)
    j.push_back({{"flags", w.flags},
                 {"peak_bytes", w.peak_bytes},
                 {"saves_bytes", baseline_peak - w.peak_bytes}});
  return j;
}

}  // namespace snug

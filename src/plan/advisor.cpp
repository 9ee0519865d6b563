#include "plan/advisor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/error.h"
#include "core/memory.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "nn/run_options.h"
#include "optim/registry.h"
#include "plan/switches.h"
#include "plan/what_if.h"
#include "train/flag_table.h"

namespace snug {

namespace {

std::string join_flags(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

}  // namespace

std::vector<SwitchDimension> advisor_dimensions(const TrainingArguments& base,
                                                int64_t target_batch) {
  std::vector<const SwitchGroup*> groups;
  for (const SwitchGroup& g : switch_groups())
    if (g.advisor_rank > 0) groups.push_back(&g);
  std::stable_sort(groups.begin(), groups.end(), [](const SwitchGroup* a, const SwitchGroup* b) {
    return a->advisor_rank < b->advisor_rank;
  });
  std::vector<SwitchDimension> dims;
  for (const SwitchGroup* g : groups) {
    SwitchDimension d{g->name, {}};
    for (Switch& s : g->choices(base, target_batch))
      if (s.advisor) d.choices.push_back({std::move(s.flags), std::move(s.apply)});
    if (!d.choices.empty()) dims.push_back(std::move(d));  // base storage: LoRA runs only
  }
  return dims;
}

double step_flops(const TrainingArguments& a) {
  const ModelConfig c = a.model_config();
  const double tokens = static_cast<double>(a.per_device_train_batch_size) *
                        static_cast<double>(a.gradient_accumulation_steps) *
                        static_cast<double>(a.seq_len);
  const FlopsPerToken f = architecture(c.shape.model_type).flops_per_token(c, a.seq_len);
  const double attention = f.attention;
  const double forward = f.forward();
  // LoRA: the frozen weights get no weight gradient, backward is the input gradients only.
  double per_token = (a.lora_r > 0 ? 2.0 : 3.0) * forward;
  if (a.gradient_checkpointing) {
    const CheckpointConfig ck = parse_checkpoint_policy(a.checkpoint_policy, c.shape.n_layer);
    if (ck.policy == CheckpointPolicy::selective) {
      if (parse_attention_impl(a.attention) == AttentionImpl::naive) per_token += attention;
    } else if (ck.policy != CheckpointPolicy::none) {
      per_token += f.layer_gemm + attention;
    }
  }
  // An update inside backward that needs the global norm first (clipping, or fp16's loss
  // scale) takes two forward + backward passes (train/fused_step.h).
  if (optimizer_entry(a.optim).updates_in_backward && (a.max_grad_norm > 0 || a.fp16))
    per_token *= 2.0;
  return per_token * tokens;
}

double step_seconds(const TrainingArguments& a, const AdvisorOptions& o) {
  const double flops = step_flops(a);
  if (a.compute_dtype() == ComputeDType::f32) return flops / o.gemm_flops;
  // fp16 always widens (oneDNN has no fp16 matmul on CPUs).
  if (a.fp16 || o.bf16_path == kernels::GemmPath::widen)
    return flops / o.gemm_flops * (1.0 + kWidenedStepOverhead);
  return flops / (o.bf16_gemm_flops > 0 ? o.bf16_gemm_flops : o.gemm_flops);
}

AdvisorResult advise(const TrainingArguments& base, const AdvisorOptions& o) {
  SNUG_CHECK(o.gemm_flops > 0 && o.bf16_gemm_flops >= 0, "advise: the GEMM rate must be positive");
  AdvisorResult r;
  r.world_size = o.data.world_size;
  r.target_batch = o.target_batch > 0
                       ? o.target_batch
                       : base.per_device_train_batch_size * base.gradient_accumulation_steps;
  const std::vector<SwitchDimension> dims = advisor_dimensions(base, r.target_batch);
  int64_t combos = 1;
  for (const SwitchDimension& d : dims) combos *= static_cast<int64_t>(d.choices.size());
  SNUG_CHECK(combos <= o.max_configs, "--advise: ", combos, " configurations to try (more than ",
             o.max_configs, "); pick a --target-batch with fewer divisors");

  std::vector<size_t> pick(dims.size(), 0);
  for (int64_t n = 0; n < combos; ++n) {
    TrainingArguments a = base;
    std::string flags;
    int64_t preference = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      const SwitchChoice& ch = dims[d].choices[pick[d]];
      ch.apply(a);
      flags = join_flags(flags, ch.flags);
      if (d > 0) preference += static_cast<int64_t>(pick[d]);
    }
    // A combination the run refuses (--bf16-full with an optimizer without bf16 state, LOMO
    // with accumulation, an optimizer a ZeRO stage cannot shard, offload in a plan for a GPU...)
    // is not an alternative: it is skipped, as in the what-if table, by the rule that refuses it
    // in a real run.
    try {
      const DryRun d = replay(a, o.data);
      const int64_t peak = d.memory.peak_total;
      if (!d.unbuilt.empty()) {
        ++r.refused;  // a plan only: the real run refuses it
      } else {
        ++r.tried;
        if (peak + o.overhead <= o.capacity)
          r.fitting.push_back({a, flags, peak, step_flops(a), step_seconds(a, o), preference});
      }
    } catch (const OutOfMemoryError&) {
      throw;
    } catch (const Error&) {
      ++r.refused;
    }
    for (size_t d = dims.size(); d-- > 0;) {  // next combination (odometer)
      if (++pick[d] < dims[d].choices.size()) break;
      pick[d] = 0;
    }
  }
  std::stable_sort(r.fitting.begin(), r.fitting.end(), [](const Advice& x, const Advice& y) {
    if (x.step_s != y.step_s) return x.step_s < y.step_s;
    // Equal estimated time: the fewest departures from the run's own switches (its optimizer
    // before SGD, fp32 before 16 bits), then fewer micro-batches (larger GEMMs).
    if (x.preference != y.preference) return x.preference < y.preference;
    if (x.args.gradient_accumulation_steps != y.args.gradient_accumulation_steps)
      return x.args.gradient_accumulation_steps < y.args.gradient_accumulation_steps;
    return x.peak_bytes < y.peak_bytes;
  });
  return r;
}

std::string train_command_line(const TrainingArguments& a, const std::string& device_memory,
                               int world_size) {
  std::string s =
      world_size > 1 ? "mpirun -np " + std::to_string(world_size) + " snug train" : "snug train";
  for (const TrainingFlag& f : training_flags()) {
    if (f.shown == Shown::never || (f.when && !f.when(a))) continue;
    if (f.shown == Shown::changed && f.is_default(a)) continue;
    const std::string words = f.render(a);
    if (!words.empty()) s += " " + words;
  }
  // The device planned for (a plan replays on meta with its kernel choices): a GPU's run needs
  // the flag; cpu is the default.
  if (cuda_index(a.kernels_device()).has_value()) s += " --device " + a.kernels_device();
  // As the user gave it (a GPU preset reads better than its bytes).
  if (!device_memory.empty()) s += " --device-memory " + shell_word(device_memory);
  return s;
}

std::string advice_table(const AdvisorResult& r, int64_t capacity, int64_t overhead, size_t top) {
  std::ostringstream os;
  char buf[512];
  // Steps that all take under a second are shown in ms: a small model's times would all read
  // 0.00 s, and the ranking would not show why.
  const size_t shown = std::min(top, r.fitting.size());
  bool ms = shown > 0;
  for (size_t i = 0; i < shown; ++i) ms = ms && r.fitting[i].step_s < 1.0;
  std::snprintf(buf, sizeof buf, "%4s %10s %10s %12s  %s\n", "rank", ms ? "step ms" : "step s",
                "peak MiB", "headroom MiB", "switches");
  os << buf;
  for (size_t i = 0; i < shown; ++i) {
    const Advice& a = r.fitting[i];
    std::snprintf(buf, sizeof buf, "%4zu %10.2f %10.1f %12.1f  %s\n", i + 1,
                  ms ? a.step_s * 1e3 : a.step_s, mib(a.peak_bytes),
                  mib(capacity - overhead - a.peak_bytes), a.flags.c_str());
    os << buf;
  }
  return os.str();
}

nlohmann::json advice_json(const AdvisorResult& r, const std::string& device_memory, size_t top) {
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < r.fitting.size() && i < top; ++i) {
    const Advice& a = r.fitting[i];
    rows.push_back({{"rank", i + 1},
                    {"flags", a.flags},
                    {"peak_bytes", a.peak_bytes},
                    {"step_flops", a.flops},
                    {"step_seconds", a.step_s},
                    {"command", train_command_line(a.args, device_memory, r.world_size)}});
  }
  return {{"target_batch", r.target_batch},
          {"tried", r.tried},
          {"refused", r.refused},
          {"fitting", static_cast<int64_t>(r.fitting.size())},
          {"configurations", rows}};
}

}  // namespace snug

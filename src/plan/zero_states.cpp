#include "plan/zero_states.h"

#include <cstdio>
#include <iomanip>
#include <sstream>
#include <string>

#include "core/error.h"
#include "core/memory.h"
#include "io/text_width.h"
#include "plan/switches.h"

namespace snug {

namespace {

int64_t cat(const MemoryEstimate& est, Category c) {
  return est.bytes[static_cast<int>(c)];
}

int64_t share(int64_t bytes, int64_t world) {
  return (bytes + world - 1) / world;
}

// Bytes per parameter, as the paper writes its coefficients ("2", "12", "0.5").
std::string coef(int64_t bytes, int64_t params) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g",
                params > 0 ? static_cast<double>(bytes) / static_cast<double>(params) : 0.0);
  return buf;
}

}  // namespace

int64_t zero_states_bytes(const MemoryEstimate& est, int stage, int64_t world) {
  SNUG_CHECK(stage >= 0 && stage < kZeroStages, "ZeRO stage ", stage, " (0-3)");
  SNUG_CHECK(world >= 1, "world size ", world, " (at least 1)");
  const int64_t w = cat(est, Category::weights), g = cat(est, Category::gradients),
                o = cat(est, Category::optimizer_state);
  switch (stage) {
    case 0:
      return w + g + o;
    case 1:
      return w + g + share(o, world);
    case 2:
      return w + share(g + o, world);
    default:
      return share(w + g + o, world);
  }
}

std::array<ZeroStates, kZeroStages> zero_model_states(const MemoryEstimate& est, int64_t world) {
  const int64_t P = est.params;
  const std::string W = coef(cat(est, Category::weights), P),
                    G = coef(cat(est, Category::gradients), P),
                    O = coef(cat(est, Category::optimizer_state), P);
  const std::array<std::string, kZeroStages> formula = {
      "(" + W + "+" + G + "+" + O + ")Ψ", "(" + W + "+" + G + ")Ψ + " + O + "Ψ/N",
      W + "Ψ + (" + G + "+" + O + ")Ψ/N", "(" + W + "+" + G + "+" + O + ")Ψ/N"};
  std::array<ZeroStates, kZeroStages> rows;
  for (int s = 0; s < kZeroStages; ++s) rows[s] = {s, formula[s], zero_states_bytes(est, s, world)};
  return rows;
}

std::string zero_states_table(const MemoryEstimate& est, int64_t world, int plan_stage,
                              int64_t plan_states) {
  std::ostringstream os;
  char buf[256];
  const int64_t P = est.params;
  std::snprintf(buf, sizeof buf,
                "ZeRO's model states per rank (Rajbhandari et al. 2020), N = %lld ranks, Ψ = %lld "
                "parameters, K = %s bytes of optimizer state per parameter:\n",
                static_cast<long long>(world), static_cast<long long>(P),
                coef(est.bytes[static_cast<int>(Category::optimizer_state)], P).c_str());
  os << buf;
  std::snprintf(buf, sizeof buf, "%-6s %-26s %16s %10s %16s\n", "stage", "formula (bytes)",
                "bytes per rank", "GB", "plan (this run)");
  os << buf;
  for (const ZeroStates& r : zero_model_states(est, world)) {
    const std::string plan = r.stage == plan_stage ? std::to_string(plan_states) : "";
    std::snprintf(buf, sizeof buf, " %16lld %10.3f %16s\n", static_cast<long long>(r.bytes),
                  static_cast<double>(r.bytes) / 1e9, plan.c_str());
    os << std::left << std::setw(6) << r.stage << ' ' << pad_to_width(r.formula, 26) << buf;
  }
  os << "formulas without the flat layout's padding, buckets, activations and temporaries; the "
        "plan counts them (GB = 1e9 bytes)\n";
  if (plan_stage == 3)
    os << "stage 3's plan counts the weights a rank keeps, its shards (a rank builds the model "
          "whole before partitioning it: snug plan gives that peak)\n";
  return os.str();
}

nlohmann::json zero_states_json(const MemoryEstimate& est, int64_t world, int plan_stage,
                                int64_t plan_states) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ZeroStates& r : zero_model_states(est, world)) {
    nlohmann::json j = {{"stage", r.stage}, {"formula", r.formula}, {"bytes_per_rank", r.bytes}};
    if (r.stage == plan_stage) j["plan_bytes"] = plan_states;
    rows.push_back(j);
  }
  return {{"world_size", world},
          {"params", est.params},
          {"k", est.params > 0
                    ? static_cast<double>(est.bytes[static_cast<int>(Category::optimizer_state)]) /
                          static_cast<double>(est.params)
                    : 0.0},
          {"stages", rows}};
}

namespace {

int64_t plan_states(const MemoryStats& m) {
  return m.max_by_category[static_cast<int>(Category::weights)] +
         m.max_by_category[static_cast<int>(Category::gradients)] +
         m.max_by_category[static_cast<int>(Category::optimizer_state)];
}

}  // namespace

std::array<ZeroFit, kZeroStages> zero_fits(const TrainingArguments& args, const DryRunData& data,
                                           int64_t capacity, int64_t overhead, int64_t max_world) {
  TrainingArguments one = args;
  one.zero_stage = 0;
  const MemoryEstimate est = estimate_memory(one);
  DryRunData one_process = data;
  one_process.world_size = 1;
  const MemoryStats base = dry_run(one, one_process);
  const int64_t rest = base.peak_total - plan_states(base);  // activations, temporaries, ...
  std::array<ZeroFit, kZeroStages> fits;
  for (int s = 0; s < kZeroStages; ++s) {
    ZeroFit& f = fits[s];
    f.stage = s;
    int64_t n = 1;
    for (; n <= max_world; n *= 2) {
      f.peak = rest + zero_states_bytes(est, s, n);
      if (f.peak + overhead <= capacity) break;
    }
    if (n > max_world) continue;  // world 0: none fits by the formula
    f.world = n;
    if (s == 0 && n == 1) {
      f.peak = base.peak_total;
      f.replayed = true;
      continue;
    }
    TrainingArguments a = args;
    a.zero_stage = s;
    try {
      for (; n <= max_world; n *= 2) {
        DryRunData rank0 = data;
        rank0.world_size = static_cast<int>(n);
        const DryRun d = replay(a, rank0);
        // A plan only: its bytes are exact, and the row says a real run is refused, and why.
        f.note = d.unbuilt.empty() ? "" : "plan only: " + d.unbuilt;
        const int64_t peak = d.memory.peak_total;
        f.world = n;
        f.peak = peak;
        f.replayed = true;
        if (peak + overhead <= capacity) break;
      }
      if (n > max_world) {
        f.world = 0;
        f.note.clear();
      }
    } catch (const Error& e) {
      f.replayed = false;
      f.note = e.what();
    }
  }
  return fits;
}

std::string zero_fits_table(const std::array<ZeroFit, kZeroStages>& fits, int64_t max_world,
                            const std::string& added) {
  std::ostringstream os;
  char buf[512];
  os << "ZeRO over more ranks "
     << (added.empty() ? "(the run's flags" : "with " + added + " (the run's flags with " + added)
     << ", per-rank batch; smallest power-of-two world that fits, by ZeRO's formulas, checked "
        "by a replay of rank 0):\n";
  for (const ZeroFit& f : fits) {
    if (f.world == 0) {
      std::snprintf(buf, sizeof buf, "  --zero-stage %d: none up to %lld ranks fits\n", f.stage,
                    static_cast<long long>(max_world));
    } else {
      std::snprintf(
          buf, sizeof buf, "  --zero-stage %d --world-size %lld: %.1f MiB per rank (%s%s%s)\n",
          f.stage, static_cast<long long>(f.world), mib(f.peak),
          f.replayed ? "meta replay" : "formula", f.note.empty() ? "" : "; ", f.note.c_str());
    }
    os << buf;
  }
  return os.str();
}

nlohmann::json zero_fits_json(const std::array<ZeroFit, kZeroStages>& fits) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ZeroFit& f : fits) {
    nlohmann::json j = {{"stage", f.stage},
                        {"world_size", f.world > 0 ? nlohmann::json(f.world) : nlohmann::json()},
                        {"peak_bytes", f.peak},
                        {"source", f.replayed ? "replay" : "formula"}};
    if (!f.note.empty()) j["note"] = f.note;
    rows.push_back(j);
  }
  return rows;
}

std::vector<std::pair<std::string, TrainingArguments>> zero_alternatives(
    const TrainingArguments& args) {
  static const char* const kFlags[] = {"--bf16-full"};
  std::vector<std::pair<std::string, TrainingArguments>> out;
  for (const SwitchGroup& g : switch_groups())
    for (const Switch& s :
         g.choices(args, args.per_device_train_batch_size * args.gradient_accumulation_steps))
      for (const char* f : kFlags)
        if (s.flags == f && s.what_if && s.what_if(args)) {
          TrainingArguments a = args;
          s.apply(a);
          out.emplace_back(s.flags, a);
        }
  return out;
}

}  // namespace snug

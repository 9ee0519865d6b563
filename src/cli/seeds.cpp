#include "cli/seeds.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "core/device.h"
#include "core/error.h"
#include "core/parallel.h"
#include "data/dataset.h"
#include "io/text_width.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "optim/registry.h"
#include "plan/what_if.h"
#include "report/bench_plot.h"
#include "train/trainer.h"

namespace snug {

namespace {

// Mixed precision switches, as Hugging Face names them (TrainingArguments.fp16 / .bf16).
void set_precision(TrainingArguments& a, const std::string& precision) {
  a.fp16 = precision == "fp16";
  a.bf16 = precision == "bf16";
}

bool has_optimizer(const std::string& name) {
  return find_optimizer(name) != nullptr;
}

// What the chart and the category columns read of the rows.
std::vector<PeakBar> peak_bars(const std::vector<BenchRow>& rows) {
  std::vector<PeakBar> bars;
  for (const BenchRow& r : rows)
    bars.push_back(
        {r.name, r.description, r.available, r.out_of_memory, r.need_bytes, r.note, r.memory});
  return bars;
}

nlohmann::json by_category_json(const ByCategory& b) {
  nlohmann::json j = nlohmann::json::object();
  for (int i = 0; i < kNumCategories; ++i) j[category_name(category_at(i))] = b[i];
  return j;
}

// A real run of `a` on the cpu device: a fresh model, the dataset, the Trainer.
void run_real(BenchRow& row) {
  const TrainingArguments& a = row.args;
  const ModelConfig cfg = a.model_config();
  Device dev(cpu_backend());
  dev.pool().set_capacity(a.device_memory);
  std::unique_ptr<Model> model;
  try {
    model = create_model(cfg, dev);
  } catch (const OutOfMemoryError& e) {
    row.out_of_memory = true;
    row.error = e.what();
    row.memory = dev.pool().stats();
    return;
  }
  model->init_weights(a.seed);
  const auto data = open_dataset(a.data, cfg.shape.vocab_size, a.seed);
  Trainer trainer(a, *model, data.get());
  const TrainResult r = trainer.train();
  row.memory = dev.pool().stats();
  row.train_runtime = r.runtime_s;
  row.train_samples_per_second =
      r.runtime_s > 0 ? static_cast<double>(r.samples) / r.runtime_s : 0.0;
  row.out_of_memory = r.out_of_memory;
  row.error = r.error;
}

// A dry run of `a` on the meta device under a.device_memory (two optimizer steps: the second
// holds the optimizer state, so it has the run's peak).
void run_dry(BenchRow& row) {
  TrainingArguments& a = row.args;
  a.device = "meta";
  a.max_steps = 2;
  row.dry = true;
  Device dev(meta_backend());
  dev.pool().set_capacity(a.device_memory);
  try {
    const auto model = create_model(a.model_config(), dev, a.param_dtype(), a.weight_quant());
    Trainer trainer(a, *model, nullptr);
    const TrainResult r = trainer.train();
    row.out_of_memory = r.out_of_memory;
    row.error = r.error;
  } catch (const OutOfMemoryError& e) {
    row.out_of_memory = true;
    row.error = e.what();
  }
  row.memory = dev.pool().stats();
}

void finish_oom(BenchRow& row) {
  if (!row.out_of_memory) return;
  TrainingArguments uncapped = row.args;
  uncapped.device_memory.reset();
  row.need_bytes = dry_run(uncapped).peak_total;
  const int64_t cap = row.args.device_memory.value_or(0);
  char buf[160];
  std::snprintf(buf, sizeof buf, "OOM: needs %.1f MiB, capacity %.1f MiB", mib(row.need_bytes),
                mib(cap));
  row.note = buf;
}

}  // namespace

std::vector<SeedRowSpec> seed_matrix() {
  std::vector<SeedRowSpec> m;
  auto add = [&](std::string name, std::string description, int64_t batch, int64_t accum, bool ckpt,
                 std::string precision, std::string optim) {
    m.push_back({std::move(name), std::move(description), batch, accum, ckpt, std::move(precision),
                 std::move(optim)});
  };
  add("vanilla", "B=4", 4, 1, false, "fp32", "adamw_torch");
  add("grad_accum", "B=1, accum 4", 1, 4, false, "fp32", "adamw_torch");
  add("grad_ckpt", "B=1, accum 4, ckpt", 1, 4, true, "fp32", "adamw_torch");
  add("fp16", "B=4, fp16", 4, 1, false, "fp16", "adamw_torch");
  add("bf16", "B=4, bf16", 4, 1, false, "bf16", "adamw_torch");
  add("combined", "B=1, accum 4, ckpt, fp16", 1, 4, true, "fp16", "adamw_torch");
  add("adafactor", "B=4, adafactor", 4, 1, false, "fp32", "adafactor");
  add("adafactor_combined", "B=1, accum 4, ckpt, fp16, adafactor", 1, 4, true, "fp16", "adafactor");
  add("adamw_8bit", "B=4, adamw_bnb_8bit", 4, 1, false, "fp32", "adamw_bnb_8bit");
  add("all", "B=1, accum 4, ckpt, fp16, adamw_bnb_8bit", 1, 4, true, "fp16", "adamw_bnb_8bit");
  return m;
}

TrainingArguments seeds_base_args(const SeedsOptions& opts) {
  SNUG_CHECK(opts.max_steps > 0, "--max-steps must be positive, got ", opts.max_steps);
  const ModelConfig cfg = resolve_model(opts.model);
  TrainingArguments a;
  a.model = opts.model;
  a.data = opts.data;
  a.seq_len = opts.seq_len.value_or(std::min<int64_t>(512, cfg.shape.n_positions));
  cli::check_seq_len(a.seq_len, cfg);
  a.per_device_train_batch_size = 4;
  a.gradient_accumulation_steps = 1;
  a.max_steps = opts.max_steps;
  a.optim = "adamw_torch";
  a.device = "cpu";
  a.device_memory = opts.device_memory;
  a.threads = opts.threads;
  a.seed = opts.seed;
  a.logging_steps = std::max<int64_t>(1, opts.max_steps);
  a.validate();
  return a;
}

TrainingArguments seed_row_args(const TrainingArguments& base, const SeedRowSpec& spec) {
  TrainingArguments a = base;
  a.per_device_train_batch_size = spec.batch;
  a.gradient_accumulation_steps = spec.accumulation;
  a.gradient_checkpointing = spec.checkpointing;
  a.checkpoint_policy = "every-layer";
  set_precision(a, spec.precision);
  a.optim = spec.optim;
  return a;
}

namespace {

// A row of the matrix before it runs: available when its optimizer is built in.
BenchRow seed_row(const TrainingArguments& base, const SeedRowSpec& spec) {
  BenchRow row;
  row.name = spec.name;
  row.description = spec.description;
  row.args = seed_row_args(base, spec);
  row.available = has_optimizer(spec.optim);
  if (!row.available) row.note = "not available (optimizer " + spec.optim + " not built in)";
  return row;
}

}  // namespace

std::vector<BenchRow> run_seed_matrix(const SeedsOptions& opts, const BenchObserver& observe) {
  const TrainingArguments base = seeds_base_args(opts);
  set_num_threads(base.threads);
  std::vector<BenchRow> rows;
  for (const SeedRowSpec& spec : seed_matrix()) {
    BenchRow row = seed_row(base, spec);
    if (observe) observe(row, false);
    if (row.available) {
      run_real(row);
      if (row.out_of_memory) finish_oom(row);
    }
    if (observe) observe(row, true);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<BenchRow> run_batch_sweep(const SeedsOptions& opts, int64_t capacity, int64_t max_batch,
                                      const BenchObserver& observe) {
  SNUG_CHECK(capacity > 0, "--sweep needs a positive --device-memory");
  SeedsOptions o = opts;
  o.device_memory = capacity;
  const TrainingArguments base = seeds_base_args(o);
  set_num_threads(base.threads);
  std::vector<BenchRow> rows;
  for (int64_t b = 4; b <= max_batch; b *= 2) {
    BenchRow row;
    row.name = "B=" + std::to_string(b);
    row.description = "vanilla, B=" + std::to_string(b);
    row.args = base;
    row.args.per_device_train_batch_size = b;
    row.available = true;
    if (observe) observe(row, false);
    run_dry(row);
    finish_oom(row);
    if (observe) observe(row, true);
    const bool stop = row.out_of_memory;
    rows.push_back(std::move(row));
    if (stop) break;
  }
  return rows;
}

std::string seeds_table(const std::vector<BenchRow>& rows) {
  size_t wn = 3, wd = 13;
  for (const BenchRow& r : rows) {
    wn = std::max(wn, r.name.size());
    wd = std::max(wd, r.description.size());
  }
  std::ostringstream os;
  char buf[256];
  os << pad_to_width("row", wn) << "  " << pad_to_width("configuration", wd);
  std::snprintf(buf, sizeof buf, "  %9s  %15s  %21s\n", "Time (s)", "Samples/second",
                "Memory occupied (MiB)");
  os << buf;
  std::vector<std::string> notes;
  for (const BenchRow& r : rows) {
    os << pad_to_width(r.name, wn) << "  " << pad_to_width(r.description, wd);
    if (!r.available) {
      os << "  " << r.note << "\n";
      continue;
    }
    if (r.out_of_memory) {
      os << "  " << r.note << "\n";
      continue;
    }
    if (r.dry)
      std::snprintf(buf, sizeof buf, "  %9s  %15s  %21.1f\n", "dry run", "-",
                    mib(r.memory.peak_total));
    else
      std::snprintf(buf, sizeof buf, "  %9.2f  %15.2f  %21.1f\n", r.train_runtime,
                    r.train_samples_per_second, mib(r.memory.peak_total));
    os << buf;
    if (!r.note.empty()) notes.push_back(r.name + ": " + r.note);
    if (!r.error.empty()) notes.push_back(r.name + ": error: " + r.error);
  }
  for (const std::string& n : notes) os << "  note " << n << "\n";
  return os.str();
}

std::string category_table(const std::vector<BenchRow>& rows) {
  const std::vector<int> cats = used_categories(peak_bars(rows));
  size_t wn = 3;
  for (const BenchRow& r : rows) wn = std::max(wn, r.name.size());
  std::ostringstream os;
  char buf[64];
  os << "peak memory by category (MiB at the peak)\n" << pad_to_width("row", wn);
  for (int c : cats) {
    std::snprintf(buf, sizeof buf, "  %15s", category_name(category_at(c)));
    os << buf;
  }
  std::snprintf(buf, sizeof buf, "  %9s  ", "total");
  os << buf << "peak during\n";
  for (const BenchRow& r : rows) {
    if (!r.available) continue;
    os << pad_to_width(r.name, wn);
    for (int c : cats) {
      std::snprintf(buf, sizeof buf, "  %15.2f", mib(r.memory.peak_by_category[c]));
      os << buf;
    }
    std::snprintf(buf, sizeof buf, "  %9.2f  ", mib(r.memory.peak_total));
    os << buf << (r.out_of_memory ? "(out of memory) " : "") << r.memory.peak_phase << "\n";
  }
  return os.str();
}

std::string sweep_table(const std::vector<BenchRow>& rows, int64_t capacity) {
  const std::vector<int> cats = used_categories(peak_bars(rows));
  std::ostringstream os;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%-8s", "batch");
  os << buf;
  for (int c : cats) {
    std::snprintf(buf, sizeof buf, "  %15s", category_name(category_at(c)));
    os << buf;
  }
  std::snprintf(buf, sizeof buf, "  %10s  %s\n", "total MiB", "result");
  os << buf;
  for (const BenchRow& r : rows) {
    std::snprintf(buf, sizeof buf, "%-8lld",
                  static_cast<long long>(r.args.per_device_train_batch_size));
    os << buf;
    if (r.out_of_memory) {
      for (size_t i = 0; i < cats.size(); ++i) os << "  " << std::string(15, ' ');
      std::snprintf(buf, sizeof buf, "  %10.1f  ", mib(r.need_bytes));
      os << buf << "OOM (needs " << format_bytes(r.need_bytes) << ", capacity "
         << format_bytes(capacity) << ")\n";
      continue;
    }
    for (int c : cats) {
      std::snprintf(buf, sizeof buf, "  %15.1f", mib(r.memory.peak_by_category[c]));
      os << buf;
    }
    std::snprintf(buf, sizeof buf, "  %10.1f  fits (%.1f%% of %s)\n", mib(r.memory.peak_total),
                  100.0 * static_cast<double>(r.memory.peak_total) / static_cast<double>(capacity),
                  format_bytes(capacity).c_str());
    os << buf;
  }
  return os.str();
}

nlohmann::json bench_json(const std::vector<BenchRow>& rows) {
  nlohmann::json arr = nlohmann::json::array();
  for (const BenchRow& r : rows) {
    nlohmann::json j;
    j["name"] = r.name;
    j["description"] = r.description;
    j["config"] = r.args.to_json();
    j["available"] = r.available;
    j["note"] = r.note;
    j["dry"] = r.dry;
    const bool measured = r.available && !r.dry;
    j["train_runtime"] = measured ? nlohmann::json(r.train_runtime) : nlohmann::json(nullptr);
    j["train_samples_per_second"] =
        measured ? nlohmann::json(r.train_samples_per_second) : nlohmann::json(nullptr);
    j["peak_bytes"] = r.available ? nlohmann::json(r.memory.peak_total) : nlohmann::json(nullptr);
    j["peak_phase"] = r.memory.peak_phase;
    j["peak_by_category"] = by_category_json(r.memory.peak_by_category);
    j["max_by_category"] = by_category_json(r.memory.max_by_category);
    j["out_of_memory"] = r.out_of_memory;
    j["need_bytes"] = r.out_of_memory ? nlohmann::json(r.need_bytes) : nlohmann::json(nullptr);
    j["error"] = r.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.error);
    arr.push_back(std::move(j));
  }
  return arr;
}

std::string memory_svg(const std::vector<BenchRow>& rows, const std::string& title) {
  std::optional<int64_t> capacity;  // the last row's that has one
  for (const BenchRow& r : rows)
    if (r.args.device_memory) capacity = r.args.device_memory;
  return peak_memory_svg(peak_bars(rows), capacity, title);
}

std::vector<BenchRow> run_seed_plan(const SeedsOptions& opts, const BenchObserver& observe) {
  TrainingArguments base = seeds_base_args(opts);
  // The seeds' model is AutoModelForSequenceClassification (2 labels) with eager attention: a
  // family that has that head plans it, with naive attention (what eager attention keeps).
  const ModelConfig cfg = resolve_model(opts.model);
  for (ModelTask t : architecture(cfg.shape.model_type).tasks)
    if (t == ModelTask::sequence_classification) {
      base.task = task_name(t);
      base.num_labels = 2;
    }
  base.attention = "naive";
  std::vector<BenchRow> rows;
  for (const SeedRowSpec& spec : seed_matrix()) {
    BenchRow row = seed_row(base, spec);
    if (observe) observe(row, false);
    if (row.available) {
      run_dry(row);
      finish_oom(row);
    }
    if (observe) observe(row, true);
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string seeds_plan_table(const std::vector<BenchRow>& rows, const std::string& model_name) {
  const bool same_model = model_name == kSeedsModel;
  std::ostringstream os;
  char buf[320];
  std::snprintf(buf, sizeof buf, "%-18s  %-40s  %12s  %12s  %12s  %8s\n", "row", "configuration",
                "plan (MiB)", "+ context", same_model ? "seed (MiB)" : "bert-large", "diff");
  os << buf;
  const std::vector<SeedReference> refs = seeds_reference();  // outlives `ref`
  for (const BenchRow& r : rows) {
    const SeedReference* ref = nullptr;
    for (const SeedReference& x : refs)
      if (x.name == r.name) ref = &x;
    if (!r.available) {
      std::snprintf(buf, sizeof buf, "%-18s  %-40s  %s\n", r.name.c_str(), r.description.c_str(),
                    r.note.c_str());
      os << buf;
      continue;
    }
    const int64_t peak = r.out_of_memory ? r.need_bytes : r.memory.peak_total;
    const double plan = mib(peak), occupied = plan + static_cast<double>(kSeedsCudaContextMB);
    const std::string seed = ref ? std::to_string(ref->memory_mb) : "-";
    std::string diff = "-";
    if (ref && same_model) {
      char d[32];
      std::snprintf(d, sizeof d, "%+7.1f%%",
                    100.0 * (occupied - static_cast<double>(ref->memory_mb)) /
                        static_cast<double>(ref->memory_mb));
      diff = d;
    }
    std::snprintf(buf, sizeof buf, "%-18s  %-40s  %12.0f  %12.0f  %12s  %8s%s\n", r.name.c_str(),
                  r.description.c_str(), plan, occupied, seed.c_str(), diff.c_str(),
                  r.out_of_memory ? "  (OOM)" : "");
    os << buf;
  }
  std::snprintf(buf, sizeof buf,
                "plan: the dry run's peak (meta device); + context: plus the %lld MiB nvidia-smi "
                "showed after torch.ones((1, 1)).to(\"cuda\") (CUDA context and kernels);\n",
                static_cast<long long>(kSeedsCudaContextMB));
  os << buf;
  if (same_model)
    os << "seed: the guide's \"GPU memory occupied\" (nvidia-smi); diff: (plan + context - seed) / "
          "seed. docs/memory.md explains the rows beyond 10%.\n";
  else
    os << "bert-large: the guide's \"GPU memory occupied\" for " << kSeedsModel << ", not "
       << model_name << ", shown for scale only (no diff); --model " << kSeedsModel
       << " compares with it.\n";
  return os.str();
}

std::vector<SeedReference> seeds_reference() {
  return {
      {"vanilla", "B=4", 57.82, 8.86, 14949},
      {"grad_accum", "B=1, accum 4", 66.03, 7.75, 8681},
      {"grad_ckpt", "B=1, accum 4, ckpt", 85.47, 5.99, 6775},
      {"fp16", "B=4, fp16", 27.46, 18.64, 13939},
      {"combined", "B=1, accum 4, ckpt, fp16", 50.76, 10.09, 7275},
      {"adafactor", "B=4, adafactor", 64.31, 7.96, 12295},
      {"adafactor_combined", "B=1, accum 4, ckpt, fp16, adafactor", 56.54, 9.06, 4847},
      {"adamw_8bit", "B=4, adamw_bnb_8bit", 55.95, 9.15, 13085},
      {"all", "B=1, accum 4, ckpt, fp16, adamw_bnb_8bit", 49.46, 10.35, 5363},
  };
}

std::string seeds_reference_table() {
  std::ostringstream os;
  os << "the seeds' table: bert-large-uncased on a V100 16 GB, 512 samples of 512 tokens, one "
        "epoch;\n\"GPU memory occupied\" is nvidia-smi's, including about 1343 MiB of CUDA "
        "context and kernels\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-18s  %-40s  %9s  %15s  %24s\n", "row", "configuration",
                "Time (s)", "Samples/second", "GPU memory occupied (MiB)");
  os << buf;
  for (const SeedReference& r : seeds_reference()) {
    std::snprintf(buf, sizeof buf, "%-18s  %-40s  %9.2f  %15.2f  %24lld\n", r.name.c_str(),
                  r.description.c_str(), r.time_s, r.samples_per_second,
                  static_cast<long long>(r.memory_mb));
    os << buf;
  }
  return os.str();
}

}  // namespace snug

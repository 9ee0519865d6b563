// `snug bench seeds`: the seeds' experiment table (Hugging Face, "Efficient training on a single
// GPU") measured on this machine, or with --sweep the seeds' batch-size sweep against a device
// capacity. The matrix itself lives in cli/seeds.h; this file is the command line around it.
#include <cstdio>
#include <fstream>
#include <memory>

#include "cli/commands.h"
#include "cli/number_flag.h"
#include "cli/seeds.h"
#include "core/device.h"
#include "core/error.h"
#include "core/parallel.h"
#include "io/excerpt.h"
#include "io/output_file.h"
#include "kernels/gemm_path.h"
#include "models/registry.h"
#include "report/report.h"

namespace snug::cli {

namespace {

std::string preset_list() {
  std::string s;
  for (const std::string& n : model_preset_names()) s += (s.empty() ? "" : ", ") + n;
  return s;
}

struct BenchSeedsFlags {
  SeedsOptions opts;
  int64_t seq_len = 0;  // 0: unset
  std::string device_memory;
  std::string json;
  std::string plot;
  bool sweep = false;
  bool plan_only = false;
};

void write_text_file(const std::string& path, const std::string& text) {
  write_output_file(path, text, "'" + path + "'");
}

int run_bench_seeds(BenchSeedsFlags f) {
  SeedsOptions& o = f.opts;
  if (f.seq_len != 0) o.seq_len = f.seq_len;
  if (!f.device_memory.empty()) o.device_memory = parse_device_memory(f.device_memory);
  if (!f.plot.empty())
    SNUG_CHECK(f.plot.size() > 4 && f.plot.substr(f.plot.size() - 4) == ".svg", "--plot '",
               excerpt(f.plot), "': only SVG is written (give a FILE.svg)");
  const TrainingArguments base = seeds_base_args(o);  // validates model, seq-len, steps
  set_num_threads(o.threads);
  const ModelConfig cfg = resolve_model(o.model);
  const double params_m = static_cast<double>(cfg.num_params) / 1e6;

  std::vector<BenchRow> rows;
  std::string title;
  if (f.sweep) {
    const int64_t capacity = *o.device_memory;
    std::printf(
        "snug bench seeds --sweep: %s (%.2fM parameters), seq %lld, batch 4, 8, 16, ... as dry "
        "runs on meta (2 optimizer steps, adamw_torch) until %s (%lld bytes) is exceeded\n\n",
        cfg.shape.name.c_str(), params_m, static_cast<long long>(base.seq_len),
        format_bytes(capacity).c_str(), static_cast<long long>(capacity));
    std::fflush(stdout);
    rows = run_batch_sweep(o, capacity);
    std::printf("%s", sweep_table(rows, capacity).c_str());
    if (!rows.empty() && !rows.back().out_of_memory)
      std::printf("(stopped at batch %lld without running out of memory)\n",
                  static_cast<long long>(rows.back().args.per_device_train_batch_size));
    title = "batch-size sweep: " + cfg.shape.name + ", seq " + std::to_string(base.seq_len) +
            ", capacity " + format_bytes(capacity);
  } else if (f.plan_only) {
    std::printf(
        "snug bench seeds --plan-only: %s (%.2fM parameters), seq %lld, 4 samples per optimizer "
        "step, naive (eager) attention, dry runs on meta%s\n\n",
        cfg.shape.name.c_str(), params_m, static_cast<long long>(base.seq_len),
        o.device_memory ? (" under " + format_bytes(*o.device_memory)).c_str() : "");
    std::fflush(stdout);
    rows = run_seed_plan(o);
    std::printf("%s\n%s", seeds_plan_table(rows, cfg.shape.name).c_str(),
                category_table(rows).c_str());
    title = "planned peak memory by category: " + cfg.shape.name + ", seq " +
            std::to_string(base.seq_len) + ", 4 samples per step";
  } else {
    std::printf(
        "snug bench seeds: %s (%.2fM parameters), %s data, seq %lld, %lld optimizer steps of 4 "
        "samples per row, device cpu%s, %d threads\n%s\n",
        cfg.shape.name.c_str(), params_m, base.data.c_str(), static_cast<long long>(base.seq_len),
        static_cast<long long>(base.max_steps),
        o.device_memory ? (" (" + format_bytes(*o.device_memory) + ")").c_str() : "", num_threads(),
        kernels::gemm_summary(kernels::resolve_gemm_path(base.gemm_path)).c_str());
    std::fflush(stdout);
    const size_t count = seed_matrix().size();
    size_t index = 0;
    auto observe = [&](const BenchRow& row, bool done) {
      if (!done) {
        ++index;
        std::fprintf(stderr, "[%zu/%zu] %-18s %s", index, count, row.name.c_str(),
                     row.available ? "..." : "skipped\n");
      } else if (row.available) {
        if (row.out_of_memory)
          std::fprintf(stderr, " out of memory\n");
        else
          std::fprintf(stderr, " %.2f s\n", row.train_runtime);
      }
      std::fflush(stderr);
    };
    rows = run_seed_matrix(o, observe);
    std::printf("\n%s\n%s\n%s", seeds_table(rows).c_str(), category_table(rows).c_str(),
                seeds_reference_table().c_str());
    title = "peak memory by category: " + cfg.shape.name + ", seq " + std::to_string(base.seq_len) +
            ", 4 samples per step";
  }
  if (!f.json.empty()) {
    write_json_file(f.json, bench_json(rows));
    std::printf("rows written to %s\n", f.json.c_str());
  }
  if (!f.plot.empty()) {
    write_text_file(f.plot, memory_svg(rows, title));
    std::printf("chart written to %s\n", f.plot.c_str());
  }
  std::fflush(stdout);
  for (const BenchRow& r : rows)
    if (!f.sweep && !f.plan_only && r.available && !r.out_of_memory)
      SNUG_CHECK(r.error.empty(), "row ", r.name, ": ", r.error);
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks: reproduce the seeds' experiments");
  bench->require_subcommand(1);
  CLI::App* sub = bench->add_subcommand(
      "seeds",
      "The Hugging Face guide's table (vanilla B=4; B=1 + gradient accumulation 4; + gradient "
      "checkpointing; fp16; bf16; combined; Adafactor; 8-bit Adam; all combined): Time, "
      "Samples/second and Memory occupied per row, measured on cpu, with the peak split by "
      "category. With --sweep: the batch-size sweep 4, 8, 16, ... until --device-memory is "
      "exceeded, as dry runs on meta");
  auto f = std::make_shared<BenchSeedsFlags>();
  sub->add_option("--model", f->opts.model,
                  "Model preset (" + preset_list() + ") or a Hugging Face config.json")
      ->capture_default_str();
  add_number_flag(sub, "--seq-len", f->seq_len, NumberRange::integer(1, 1 << 24),
                  "Tokens per sequence; default 512 (the seeds'), or the model's context if "
                  "shorter (gpt2-tiny: 256)");
  add_number_flag(sub, "--max-steps", f->opts.max_steps, NumberRange::integer(1, kMaxFlagCount),
                  "Optimizer steps per row (4 samples each)");
  sub->add_option("--data", f->opts.data,
                  "dummy (random tokens, as the seeds), builtin, or a PATH to a text or token "
                  "file")
      ->capture_default_str();
  CLI::Option* mem =
      sub->add_option("--device-memory", f->device_memory,
                      "Modelled device capacity for every run: bytes (16GiB, 24GB, 1e9) or a GPU "
                      "preset (" +
                          device_memory_presets_help() + "); default: unlimited");
  add_number_flag(sub, "--threads", f->opts.threads, NumberRange::integer(0, kMaxFlagThreads),
                  "CPU threads (0: OMP_NUM_THREADS or all cores)");
  add_number_flag(sub, "--seed", f->opts.seed, NumberRange::unsigned_integer(UINT64_MAX),
                  "Seed for initialization and data");
  sub->add_option("--json", f->json, "Write the rows as a JSON array to this path");
  sub->add_option("--plot", f->plot,
                  "Write an SVG stacked bar chart of peak memory per row by category (FILE.svg)");
  sub->add_flag("--sweep", f->sweep,
                "Run the batch-size sweep (B = 4, 8, 16, ...; vanilla config; meta dry runs) "
                "instead of the table; needs --device-memory")
      ->needs(mem);
  sub->add_flag("--plan-only", f->plan_only,
                "Predict the table's memory instead of running it: every row as a dry run on "
                "meta, beside the seeds' measured figures with the difference per row");
  Command c;
  c.sub = sub;
  c.run = [f]() { return run_bench_seeds(*f); };
  return c;
}

}  // namespace snug::cli

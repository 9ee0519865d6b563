// `snug train`: builds the model on the chosen device, trains it, prints the summary and the
// memory table, and writes the JSON report.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/progress.h"
#include "core/device.h"
#include "core/error.h"
#include "core/parallel.h"
#include "data/batches.h"
#include "dist/make_communicator.h"
#include "kernels/backends.h"
#include "models/hf_folder.h"
#include "models/registry.h"
#include "nn/init_progress.h"
#include "optim/optimizer.h"
#include "plan/dry_run.h"
#include "plan/what_if.h"
#include "report/device_memory.h"
#include "report/memory_timeline.h"
#include "report/report.h"
#include "train/model_setup.h"
#include "train/output_dir.h"
#include "train/trainer.h"
#include "train/zero3_init.h"

namespace snug::cli {

namespace {

// Forwards each step to the console and keeps its end time for the report's "step_end_s" (so a
// caller can leave out the first, warm-up step when it computes a rate).
class StepTimes final : public TrainCallback {
 public:
  explicit StepTimes(TrainCallback& next) : next_(next) {}
  void on_step(const StepLog& log) override {
    ends.push_back(log.elapsed_s);
    next_.on_step(log);
  }
  void on_eval(const EvalLog& log) override { next_.on_eval(log); }
  std::vector<double> ends;

 private:
  TrainCallback& next_;
};

// Data parallelism: the ranks of one job share the output dir's lock (train/output_dir_lock.h)
// under one SNUG_JOB_ID; without one from the launcher's user, rank 0 names the job and every
// rank takes its name.
void share_job_id(dist::Communicator& comm) {
  if (comm.size() == 1 || std::getenv("SNUG_JOB_ID") != nullptr) return;
  char id[128] = {};
  if (comm.rank() == 0) {
    char host[64] = {};
    gethostname(host, sizeof host - 1);
    std::snprintf(id, sizeof id, "mpirun rank 0 pid %ld on %s", static_cast<long>(getpid()), host);
  }
  comm.broadcast(id, sizeof id, 0);
  setenv("SNUG_JOB_ID", id, 1);
}

// Every rank's memory by category (docs/report.md's "ranks"), gathered on every rank: an int64
// sum where each rank fills its own row.
nlohmann::json ranks_memory_json(const MemoryStats& mem, dist::Communicator& comm) {
  constexpr int kRow = 2 + 3 * kNumCategories;
  std::vector<int64_t> rows(static_cast<size_t>(comm.size() * kRow), 0);
  int64_t* mine = &rows[static_cast<size_t>(comm.rank() * kRow)];
  mine[0] = mem.peak_total;
  mine[1] = mem.live_total;
  for (int c = 0; c < kNumCategories; ++c) {
    mine[2 + c] = mem.peak_by_category[static_cast<size_t>(c)];
    mine[2 + kNumCategories + c] = mem.max_by_category[static_cast<size_t>(c)];
    mine[2 + 2 * kNumCategories + c] = mem.live[static_cast<size_t>(c)];
  }
  comm.all_reduce_sum(rows.data(), rows.size());
  nlohmann::json out = nlohmann::json::array();
  for (int r = 0; r < comm.size(); ++r) {
    const int64_t* row = &rows[static_cast<size_t>(r * kRow)];
    nlohmann::json at_peak, max, final;
    for (int c = 0; c < kNumCategories; ++c) {
      at_peak[category_name(category_at(c))] = row[2 + c];
      max[category_name(category_at(c))] = row[2 + kNumCategories + c];
      final[category_name(category_at(c))] = row[2 + 2 * kNumCategories + c];
    }
    out.push_back({{"rank", r},
                   {"peak_total", row[0]},
                   {"live_total_at_end", row[1]},
                   {"peak_by_category", at_peak},
                   {"max_by_category", max},
                   {"final_by_category", final}});
  }
  return out;
}

// The training run proper. The device is created into `dev_ptr` (the caller reports its memory if
// setup fails); `reported` turns true once the full report is being written.
int train_and_report(const TrainingArguments& args, const std::string& memory_timeline,
                     std::unique_ptr<Device>& dev_ptr, bool& reported, dist::Communicator& comm) {
  args.validate();
  set_num_threads(args.threads);
  const ModelConfig cfg = args.model_config();
  check_seq_len(args.seq_len, cfg);
  dev_ptr = make_device(args.device);
  Device& dev = *dev_ptr;
  dev.pool().set_capacity(args.device_memory);
  dev.pool().enable_timeline(!memory_timeline.empty());
  const std::optional<int64_t> capacity = args.device_memory;

  // --zero-stage 3: each trainable parameter partitioned as it is made and loaded (zero.Init,
  // train/zero3_init.h), so no rank holds the whole model; the Trainer takes the shards over.
  std::unique_ptr<nn::ConstructionPartition> zero3 =
      zero3_init(args, dev, comm.rank(), comm.size());
  auto model = create_model(cfg, dev, args.param_dtype(), args.weight_quant());
  // --init-from, the --model folder's weights, or --seed (train/model_setup.h), with a
  // progress line on stderr for models of kStartupProgressMin parameters or more.
  {
    constexpr int64_t kStartupProgressMin = 250'000'000;
    const int64_t P = count_params(model->parameters());
    std::optional<nn::InitProgress> progress;
    if (!dev.is_meta() && P >= kStartupProgressMin) progress.emplace(stderr, P, "initializing");
    load_initial_weights(*model, args, cfg);
  }
  if (!cfg.folder.empty() && initial_weights_path(args, cfg).empty())
    std::printf(
        "snug: the model folder %s has no weights (%s or %s): initialized from --seed %llu\n",
        cfg.folder.c_str(), kHfSingleWeightsFile, kHfWeightsIndexFile,
        static_cast<unsigned long long>(args.seed));
  const OpenedData data = open_data(args.data_options(cfg.shape.vocab_size));
  std::unique_ptr<Trainer> made;
  try {
    made = std::make_unique<Trainer>(args, *model, data.train.get(), data.eval.get(), &comm);
    zero3.reset();
  } catch (const OutputDirInUseError& e) {
    // A usage mistake caught before step 1: the bad-command-line exit status.
    std::fprintf(stderr, "snug: error: %s\n", e.what());
    return 2;
  }
  Trainer& trainer = *made;
  if (trainer.start_step() > 0)
    std::printf("resuming %s at step %lld\n", args.resume_from.c_str(),
                static_cast<long long>(trainer.start_step()));
  for (const std::string& change : trainer.resume_changes())
    std::printf("resume: %s (changed since the checkpoint; accepted)\n", change.c_str());
  for (const std::string& dir : trainer.removed_checkpoints())
    std::printf("--overwrite-output-dir: removed %s\n", dir.c_str());
  // `train --device meta` replays what a real run would refuse (plan/dry_run.h DryRun::unbuilt).
  if (!trainer.unbuilt().empty())
    std::fprintf(stderr, "snug: %s\n", plan_only_line(trainer.unbuilt()).c_str());

  const bool real = !dev.is_meta();
  std::printf(
      "snug: training %s (%.2fM parameters) on %s, device %s%s, batch %lld x %lld tokens, "
      "%lld steps%s\n",
      cfg.shape.name.c_str(), static_cast<double>(count_params(model->parameters())) / 1e6,
      data.train->describe().c_str(), dev.name(),
      capacity ? (" (" + format_bytes(*capacity) + ")").c_str() : "",
      static_cast<long long>(args.per_device_train_batch_size),
      static_cast<long long>(args.seq_len), static_cast<long long>(trainer.total_steps()),
      comm.size() > 1 || comm.name() == "nccl"
          ? (", per rank of " + std::to_string(comm.size()) + " (" + std::string(comm.name()) + ")")
                .c_str()
          : "");
  if (!args.freeze.empty())
    std::printf("--freeze: %lld of %lld parameters train (%.2fM), the rest are frozen\n",
                static_cast<long long>(count_params(model->parameters(), true)),
                static_cast<long long>(count_params(model->parameters())),
                static_cast<double>(count_params(model->parameters(), true)) / 1e6);
  if (data.eval)
    std::printf("evaluating on %s %s\n", data.eval->describe().c_str(),
                args.eval_steps > 0
                    ? ("every " + std::to_string(args.eval_steps) + " steps and at the end").c_str()
                    : "at the end");
  std::fflush(stdout);
  ConsoleProgress progress(stdout, args.logging_steps, real);
  StepTimes times(progress);
  const TrainResult r = trainer.train(&times);
  progress.finish();

  const MemoryStats mem = dev.pool().stats();
  // Data parallelism: every rank's memory, gathered before rank 0 reports; only rank 0 writes.
  const nlohmann::json ranks = comm.size() > 1 ? ranks_memory_json(mem, comm) : nlohmann::json();
  if (comm.rank() != 0) {
    std::fflush(stdout);
    if (r.out_of_memory) throw OutOfMemoryError(r.error);
    SNUG_CHECK(r.error.empty(), r.error);
    return 0;
  }
  std::printf("%s", summary_lines(r, mem).c_str());
  if (comm.size() > 1)
    std::printf("data parallel: %d ranks, gradient all-reduce %.3f s\n", comm.size(),
                r.communication_s);
  if (real && !r.loss.empty()) std::printf("Loss: %.4f -> %.4f\n", r.loss.front(), r.loss.back());
  if (!r.evals.empty()) {
    std::printf("eval_loss: %.4f  perplexity: %.4g", r.evals.back().eval_loss,
                r.evals.back().perplexity);
    if (r.evals.back().accuracy) std::printf("  eval_accuracy: %.4f", *r.evals.back().accuracy);
    std::printf("\n");
  }
  if (!r.best_model_checkpoint.empty())
    std::printf("--load-best-model-at-end: loaded %s (%s %.4f)\n", r.best_model_checkpoint.c_str(),
                args.best_metric_key().c_str(), r.best_metric);
  std::printf("\n%s", memory_table(mem, capacity).c_str());
  std::printf("%s", device_memory_lines(dev).c_str());
  // What each memory switch that is off would change, from dry runs of the same arguments that
  // replay this run's data (its batch shapes): the baseline is the peak measured above.
  const DryRunData replayed{data.train.get(), data.eval.get()};
  const std::vector<WhatIf> alternatives = what_if(args, replayed);
  const int64_t baseline = dry_run(args, replayed).peak_total;
  if (!alternatives.empty()) std::printf("\n%s", what_if_table(alternatives, baseline).c_str());
  if (!args.report_json.empty()) {
    reported = true;
    nlohmann::json report = make_report(args, *model, r, mem, capacity);
    report["what_if"] = what_if_json(alternatives, baseline);
    report["step_end_s"] = times.ends;
    if (comm.size() > 1) {
      report["ranks"] = ranks;
      report["communication_s"] = r.communication_s;
    }
    add_device_memory(report["memory"], dev);
    write_json_file(args.report_json, report);
    std::printf("report written to %s\n", args.report_json.c_str());
  }
  if (!memory_timeline.empty()) {
    write_json_file(memory_timeline,
                    timeline_json(dev.pool().timeline(), mem, dev.name(), describe_run(args)));
    std::printf("memory timeline written to %s\n", memory_timeline.c_str());
  }
  std::fflush(stdout);
  if (r.out_of_memory) throw OutOfMemoryError(r.error);
  SNUG_CHECK(r.error.empty(), r.error);
  return 0;
}

// A run that fails before its report is written (bad flag value, missing data, out of memory
// while building the model) still writes one, as docs/report.md promises: the config, the error
// and the memory measured so far.
int run_train(TrainingArguments args, const std::string& device_memory,
              const std::string& memory_timeline) {
  std::unique_ptr<Device> dev;
  bool reported = false;
  // Under mpirun, the MPI ranks of a data-parallel run (dist/make_communicator.h); only rank 0
  // prints and writes the report, the others' standard output is dropped.
  dist::CommOptions comm_options;
  comm_options.timeout_s = args.ddp_timeout;
  // GPU ranks: the NCCL communicator on the rank's GPU (plain --device cuda under a launcher of
  // several ranks is cuda:LOCAL_RANK, one GPU per rank).
  const dist::Launch launch = dist::detect_launch([](const char* n) { return std::getenv(n); });
  dist::Placement placement;
  placement.gpu = dist::rank_gpu(args.device, launch);
  placement.backend = args.ddp_backend;
  if (placement.gpu >= 0 && cuda_index(args.device) != placement.gpu)
    args.device = "cuda:" + std::to_string(placement.gpu);
  const std::unique_ptr<dist::Communicator> comm = dist::make_communicator(comm_options, placement);
  if (comm->rank() != 0) {
    std::fflush(stdout);
    SNUG_CHECK(std::freopen("/dev/null", "w", stdout) != nullptr, "rank ", comm->rank(),
               ": cannot silence standard output");
  }
  share_job_id(*comm);
  auto fail_report = [&](const std::string& msg) {
    if (reported || args.report_json.empty() || comm->rank() != 0) return;
    reported = true;
    try {
      nlohmann::json j;
      j["config"] = args.to_json();
      j["error"] = msg;
      j["memory"] = memory_json(dev ? dev->pool().stats() : MemoryStats{}, args.device_memory);
      j["system"] = system_info(args.gemm_path, args.device);
      write_json_file(args.report_json, j);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "snug: the report could not be written either: %s\n", e.what());
    }
  };
  try {
    if (!device_memory.empty()) args.device_memory = parse_device_memory(device_memory);
    const int status = train_and_report(args, memory_timeline, dev, reported, *comm);
    // A clean end (MPI finalized); an error leaves it unfinished so mpirun ends every rank.
    if (status == 0) comm->finish();
    return status;
  } catch (const std::exception& e) {
    fail_report(e.what());
    throw;
  }
}

}  // namespace

Command add_train_command(CLI::App& app) {
  const auto c = add_training_subcommand(app, "train",
                                         "Train or fine-tune a model and report time and memory");
  auto memory_timeline = std::make_shared<std::string>();
  c.sub->add_option("--memory-timeline", *memory_timeline,
                    "Write every allocation and free (category, size, step, phase) as JSON to "
                    "this path; draw it with `snug plot-memory`");
  return {c.sub, [t = c.flags, memory_timeline] {
            return run_train(t->args, t->device_memory, *memory_timeline);
          }};
}

}  // namespace snug::cli

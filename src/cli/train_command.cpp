// `snug train`: builds the model on the chosen device, trains it, prints the summary and the
// memory table, and writes the JSON report.
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/progress.h"
#include "core/device.h"
#include "core/error.h"
#include "core/parallel.h"
#include "data/dataset.h"
#include "models/gpt2.h"
#include "optim/optimizer.h"
#include "train/report.h"
#include "train/trainer.h"
#include "train/what_if.h"

namespace snug::cli {

namespace {

int run_train(const TrainingArguments& args) {
  args.validate();
  set_num_threads(args.threads);
  const GPT2Config cfg = resolve_model(args.model);
  SNUG_CHECK(args.seq_len <= cfg.n_positions, "--seq-len ", args.seq_len, " exceeds ", cfg.name,
             "'s context of ", cfg.n_positions, " positions");
  Device dev(parse_device_kind(args.device));
  dev.pool().set_capacity(args.device_memory);
  const std::optional<int64_t> capacity = args.device_memory;

  auto fail_report = [&](const std::string& msg) {
    if (args.report_json.empty()) return;
    nlohmann::json j;
    j["config"] = args.to_json();
    j["error"] = msg;
    j["memory"] = memory_json(dev.pool().stats(), capacity);
    j["system"] = system_info();
    write_json_file(args.report_json, j);
  };

  std::unique_ptr<GPT2> model;
  try {
    model = std::make_unique<GPT2>(cfg, dev);
  } catch (const OutOfMemoryError& e) {
    fail_report(e.what());
    throw;
  }
  model->init_weights(args.seed);
  const auto data = open_dataset(args.data, cfg.vocab_size, args.seed);
  Trainer trainer(args, *model, data.get());

  const bool real = !dev.is_meta();
  std::printf(
      "snug: training %s (%.2fM parameters) on %s, device %s%s, batch %lld x %lld tokens, "
      "%lld steps\n",
      cfg.name.c_str(), static_cast<double>(count_params(model->parameters())) / 1e6,
      data->describe().c_str(), dev.name(),
      capacity ? (" (" + format_bytes(*capacity) + ")").c_str() : "",
      static_cast<long long>(args.per_device_train_batch_size),
      static_cast<long long>(args.seq_len), static_cast<long long>(trainer.total_steps()));
  std::fflush(stdout);
  ConsoleProgress progress(stdout, args.logging_steps, real);
  const TrainResult r = trainer.train(&progress);
  progress.finish();

  const MemoryStats mem = dev.pool().stats();
  std::printf("%s", summary_lines(r, mem).c_str());
  if (real && !r.loss.empty()) std::printf("Loss: %.4f -> %.4f\n", r.loss.front(), r.loss.back());
  std::printf("\n%s", memory_table(mem, capacity).c_str());
  // What each memory switch that is off would change, from dry runs of the same arguments.
  const std::vector<WhatIf> alternatives = what_if(args);
  const int64_t baseline = dry_run(args).peak_total;
  if (!alternatives.empty()) std::printf("\n%s", what_if_table(alternatives, baseline).c_str());
  if (!args.report_json.empty()) {
    nlohmann::json report = make_report(args, *model, r, mem, capacity);
    report["what_if"] = what_if_json(alternatives, baseline);
    write_json_file(args.report_json, report);
    std::printf("report written to %s\n", args.report_json.c_str());
  }
  std::fflush(stdout);
  if (r.out_of_memory) throw OutOfMemoryError(r.error);
  SNUG_CHECK(r.error.empty(), r.error);
  return 0;
}

}  // namespace

Command add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainingArguments>();
  auto device_memory = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("train", "Train a GPT-2 model and report time and memory");
  TrainingArguments& a = *args;
  sub->add_option("--model", a.model,
                  "Model preset (gpt2-tiny, gpt2-124m, gpt2-350m, gpt2-774m, gpt2-1.5b) or a "
                  "Hugging Face config.json")
      ->capture_default_str();
  sub->add_option("--data", a.data,
                  "builtin (generated corpus), dummy (random tokens) or a PATH to a text or "
                  "token file")
      ->capture_default_str();
  sub->add_option("--seq-len", a.seq_len, "Tokens per sequence")->capture_default_str();
  sub->add_option("--per-device-train-batch-size", a.per_device_train_batch_size,
                  "Sequences per micro-batch")
      ->capture_default_str();
  sub->add_option("--gradient-accumulation-steps", a.gradient_accumulation_steps,
                  "Micro-batches per optimizer step")
      ->capture_default_str();
  sub->add_option("--max-steps", a.max_steps, "Optimizer steps; -1: use --num-train-epochs")
      ->capture_default_str();
  sub->add_option("--num-train-epochs", a.num_train_epochs, "Epochs when --max-steps is -1")
      ->capture_default_str();
  sub->add_option("--learning-rate", a.learning_rate,
                  "Peak learning rate (Trainer's default is 5e-5; snug's 6e-4 suits training "
                  "from scratch)")
      ->capture_default_str();
  sub->add_option("--warmup-steps", a.warmup_steps, "Linear warm-up steps")->capture_default_str();
  sub->add_option("--lr-scheduler-type", a.lr_scheduler_type,
                  "linear, cosine, constant or constant_with_warmup")
      ->capture_default_str();
  sub->add_option("--max-grad-norm", a.max_grad_norm, "Gradient clipping norm (0: off)")
      ->capture_default_str();
  sub->add_option("--weight-decay", a.weight_decay,
                  "AdamW weight decay (not applied to biases and LayerNorm weights)")
      ->capture_default_str();
  sub->add_option("--adam-beta1", a.adam_beta1, "AdamW beta1")->capture_default_str();
  sub->add_option("--adam-beta2", a.adam_beta2, "AdamW beta2")->capture_default_str();
  sub->add_option("--adam-epsilon", a.adam_epsilon, "AdamW epsilon")->capture_default_str();
  std::string optims;
  for (const auto& n : optimizer_names()) {
    if (!optims.empty()) optims += ", ";
    optims += n;
  }
  sub->add_option("--optim", a.optim, "Optimizer: " + optims + " (docs/optimizers.md)")
      ->capture_default_str();
  sub->add_option("--momentum", a.momentum, "SGD momentum (0: no momentum buffer)")
      ->capture_default_str();
  sub->add_flag("--optim-8bit-embeddings", a.optim_8bit_embeddings,
                "adamw_bnb_8bit: 8-bit states for the embeddings too (default: fp32, as HF)");
  sub->add_flag("--adafactor-relative-step", a.adafactor_relative_step,
                "adafactor: the paper's relative step size instead of --learning-rate");
  sub->add_option("--dataloader-num-workers", a.dataloader_num_workers,
                  "Prepare batches ahead on a background thread (queue of 2 per worker)")
      ->capture_default_str();
  sub->add_option("--dataloader-pin-memory", a.dataloader_pin_memory,
                  "Accepted for compatibility; pinned host memory matters for CUDA only")
      ->capture_default_str();
  sub->add_option("--attention", a.attention,
                  "flash (tiled, online softmax: memory linear in sequence length) or naive "
                  "(materializes the T x T probabilities)")
      ->capture_default_str();
  sub->add_option("--logits", a.logits,
                  "chunked (LM head + cross-entropy a chunk of rows at a time, no B x T x V "
                  "tensor) or full (materialize the logits)")
      ->capture_default_str();
  sub->add_flag("--gradient-checkpointing", a.gradient_checkpointing,
                "Recompute activations in backward instead of keeping them");
  sub->add_option("--checkpoint-policy", a.checkpoint_policy,
                  "With --gradient-checkpointing: every-layer (as Hugging Face), every-k:K, sqrt "
                  "(about sqrt(L) checkpoints) or selective (recompute norms, softmax, GELU)")
      ->capture_default_str();
  sub->add_option("--seed", a.seed, "Seed for initialization and data order")
      ->capture_default_str();
  sub->add_option("--device", a.device, "cpu (real run) or meta (shapes only, exact memory)")
      ->capture_default_str();
  sub->add_option("--device-memory", *device_memory,
                  "Modelled device capacity: bytes (16GiB, 24GB, 1e9) or a GPU preset (" +
                      device_memory_presets_help() + "); default: unlimited");
  sub->add_option("--threads", a.threads, "CPU threads (0: OMP_NUM_THREADS or all cores)")
      ->capture_default_str();
  sub->add_option("--log-every,--logging-steps", a.logging_steps, "Log a line every N steps")
      ->capture_default_str();
  sub->add_option("--report-json", a.report_json, "Write the run report as JSON to this path");
  Command c;
  c.sub = sub;
  c.run = [args, device_memory]() {
    if (!device_memory->empty()) args->device_memory = parse_device_memory(*device_memory);
    return run_train(*args);
  };
  return c;
}

}  // namespace snug::cli

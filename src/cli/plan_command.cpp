// `snug plan`: the same flags as `snug train`, replayed on the meta device (no kernels, the same
// allocations; jsonl data is read for the run's batch shapes, other data is planned as full rows:
// plan/dry_run.h), answering "does it fit, with how much headroom, and if not, what to turn on".
// A GPU preset adds the CUDA runtime's own footprint as its own line: the seeds measured about
// 1343 MB of context and kernels on their V100 before any tensor, which is what nvidia-smi shows
// on top of the tensors. `--inference` plans a generation instead (cli/plan_inference.h).
#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "cli/number_flag.h"
#include "cli/plan_extras.h"
#include "cli/plan_inference.h"
#include "core/device.h"
#include "core/error.h"
#include "data/batches.h"
#include "kernels/backends.h"
#include "kernels/cuda/cuda_backend.h"
#include "models/registry.h"
#include "plan/dry_run.h"
#include "plan/what_if.h"
#include "report/report.h"
#include "train/freeze.h"
#include "train/model_setup.h"
#include "train/training_args.h"

namespace snug::cli {

namespace {

// --world-size N --zero-stage K (issue 30): the plan of one rank of a data-parallel run.
struct WorldFlags {
  int64_t world_size = 1;
};

int run_plan(TrainingArguments args, const std::string& device_memory, bool all_gpus,
             const std::string& json_path, const PlanExtras& extras,
             const InferenceFlags& inference, const WorldFlags& world) {
  SNUG_CHECK(!inference.on || world.world_size == 1,
             "--world-size plans training ranks; --inference plans one process");
  if (inference.on)
    return run_inference_plan(args, inference, device_memory, all_gpus, json_path, extras);
  const bool on_gpu = cuda_index(args.device).has_value();
  const ModelConfig cfg = prepare_dry_run(args);
  // jsonl examples are read (tokenized) and replayed: their batches are not full rows
  // (plan/dry_run.h). Token streams are planned as full rows without reading them.
  OpenedData data;
  if (plan_reads_data(args)) data = open_data(args.data_options(cfg.shape.vocab_size));
  const DryRunData replayed{data.train.get(), data.eval.get(), static_cast<int>(world.world_size)};
  const DryRun planned = replay(args, replayed);
  const MemoryStats& mem = planned.memory;
  // What --freeze leaves training (a shapes-only model: no bytes are touched).
  Device shapes(meta_backend());
  const auto owned = create_model(cfg, shapes, args.param_dtype(), args.weight_quant());
  Model& shape_model = *owned;
  prepare_model(shape_model, args);  // LoRA, --freeze
  const int64_t trainable = count_params(shape_model.parameters(), true);
  std::printf("snug plan: %s (%.2fM parameters), %s — dry run on meta\n\n", cfg.shape.name.c_str(),
              static_cast<double>(cfg.num_params) / 1e6, describe_step(args).c_str());
  if (!args.freeze.empty() || args.lora_r > 0)
    std::printf("%s: %lld of %lld parameters train (%.2fM), the rest are frozen\n\n",
                args.lora_r > 0 ? "LoRA" : "--freeze", static_cast<long long>(trainable),
                static_cast<long long>(count_params(shape_model.parameters())),
                static_cast<double>(trainable) / 1e6);
  if (world.world_size > 1 || args.zero_stage > 0) {
    static const char* const kStage[] = {
        "data parallel: the gradient all-reduce's bucket (--ddp-bucket-cap-mb)",
        "optimizer state sharded: its slice of the flat layout's state, the gradient "
        "all-reduce's bucket",
        "optimizer state and gradients sharded: its gradient slice, the per-micro-batch "
        "reduction's bucket",
        "parameters sharded too: its slices of every parameter, each block gathered while it "
        "runs, its gradient slice, the reduction's bucket"};
    std::printf("rank 0 of %lld (ZeRO stage %d, %s): its %lld rows of every batch of %lld\n\n",
                static_cast<long long>(world.world_size), args.zero_stage, kStage[args.zero_stage],
                static_cast<long long>(args.per_device_train_batch_size),
                static_cast<long long>(world.world_size * args.per_device_train_batch_size));
  }
  std::printf("%s\n\n", describe_batches(planned.batches).c_str());
  std::printf("%s\n", memory_table(mem, std::nullopt).c_str());
  if (planned.host)
    std::printf(
        "host pool (--offload-optimizer cpu: the optimizer's state and update; --offload-param "
        "cpu: the rank's parameter shards; the prefetcher's slots):\n%s\n",
        memory_table(*planned.host, std::nullopt).c_str());
  if (mem.pages)
    std::printf(
        "on cuda the tensors take %s of 2 MiB pages (%lld bytes, %.2f%% over the peak: the "
        "paged arena's placement, memory.pages)\n",
        format_bytes(mem.pages->reserved_bytes()).c_str(),
        static_cast<long long>(mem.pages->reserved_bytes()),
        mem.peak_total > 0 ? 100.0 * (static_cast<double>(mem.pages->reserved_bytes()) /
                                          static_cast<double>(mem.peak_total) -
                                      1.0)
                           : 0.0);
  if (on_gpu)
    std::printf(
        "on cuda, beside this peak: cuBLASLt's workspace (%s) and the CUDA context "
        "(the driver's, measured by `snug train --device cuda`: memory.driver)%s\n\n",
        format_bytes(kCudaLibraryWorkspaceBytes).c_str(),
        args.compute_dtype() == ComputeDType::bf16
            ? ", and while an attention call runs, cuDNN's scratch (its bf16 copies and "
              "workspace, stream-ordered, outside the tracked categories: "
              "memory.driver.attention_scratch_bytes)"
            : "");

  const std::vector<Verdict> verdicts = plan_verdicts(device_memory, all_gpus, mem.peak_total);
  for (const Verdict& v : verdicts) print_verdict(v);
  if (!planned.unbuilt.empty()) std::printf("\n%s\n", plan_only_line(planned.unbuilt).c_str());

  const bool any_short =
      std::any_of(verdicts.begin(), verdicts.end(), [](const Verdict& v) { return !v.fits(); });
  std::vector<WhatIf> alternatives;
  if (verdicts.empty() || any_short) {
    alternatives = what_if(args, replayed);
    if (!alternatives.empty())
      std::printf("\n%s", what_if_table(alternatives, mem.peak_total).c_str());
  }
  nlohmann::json extra_json;
  run_plan_extras(extras, args, device_memory, replayed, extra_json);
  if (!json_path.empty()) {
    nlohmann::json j = extra_json;
    j["config"] = args.to_json();
    j["config"]["trainable_params"] = trainable;
    j["memory"] = dry_run_memory_json(mem);
    if (planned.host) j["memory"]["host"] = dry_run_memory_json(*planned.host);
    j["batch_shapes"] = batches_json(planned.batches);
    j["world_size"] = world.world_size;
    j["zero_stage"] = args.zero_stage;
    j["plan_only"] = planned.unbuilt.empty() ? nlohmann::json() : nlohmann::json(planned.unbuilt);
    j["devices"] = nlohmann::json::array();
    for (const Verdict& v : verdicts) j["devices"].push_back(verdict_json(v));
    j["what_if"] = what_if_json(alternatives, mem.peak_total);
    if (on_gpu) j["cuda"] = {{"library_workspace_bytes", kCudaLibraryWorkspaceBytes}};
    write_json_file(json_path, j);
  }
  return 0;
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  const auto c = add_training_subcommand(
      app, "plan", "Will it fit? Replay a training step with shapes only and report peak memory");
  auto all_gpus = std::make_shared<bool>(false);
  auto json_path = std::make_shared<std::string>();
  auto extras = std::make_shared<PlanExtras>();
  auto inference = std::make_shared<InferenceFlags>();
  c.sub->add_flag("--all-gpus", *all_gpus, "Check every GPU preset");
  c.sub->add_option("--json", *json_path, "Write the plan as JSON to this path");
  add_plan_extra_flags(c.sub, *extras);
  add_inference_flags(c.sub, *inference);
  auto world = std::make_shared<WorldFlags>();
  add_number_flag(c.sub, "--world-size", world->world_size, NumberRange::integer(1, 1 << 20),
                  "Plan one rank of a data-parallel run of this many ranks (mpirun -np N)");
  return {c.sub, [t = c.flags, all_gpus, json_path, extras, inference, world] {
            return run_plan(t->args, t->device_memory, *all_gpus, *json_path, *extras, *inference,
                            *world);
          }};
}

}  // namespace snug::cli

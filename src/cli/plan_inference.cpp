#include "cli/plan_inference.h"

#include <cstdio>

#include "cli/commands.h"
#include "core/device.h"
#include "core/error.h"
#include "generate/generation_config.h"
#include "plan/fit_search.h"
#include "plan/inference_plan.h"
#include "report/memory_timeline.h"
#include "report/report.h"

namespace snug::cli {

namespace {

std::string describe_generation(const TrainingArguments& args, const InferenceShape& s) {
  return detail::concat(
      "batch ", s.batch, " x (prompt ", s.prompt_tokens, " + ", s.max_new_tokens,
      " new tokens = context ", s.context(), "), ",
      s.num_beams > 1 ? detail::concat(s.num_beams, " beams") : std::string("greedy"), ", ",
      generation_precision_words(args),
      args.weight_quant() ? ", quantized base (" + args.weight_quant()->resolved().describe() + ")"
                          : std::string());
}

// --find-max-batch / --find-max-seq-len over the generation's dry runs.
void find_max(const PlanExtras& x, const TrainingArguments& args, const InferenceShape& shape,
              const std::string& device_memory, nlohmann::json& j) {
  const int64_t capacity = parse_device_memory(device_memory);
  const int64_t overhead = runtime_overhead_bytes(device_memory);
  std::printf("\n");
  if (x.find_max_batch) {
    // 2^20 prompts: far past any capacity, a bound for the doubling only.
    const FitSearchResult r = find_max_fit(
        [&](int64_t v) {
          InferenceShape s = shape;
          s.batch = v;
          return inference_dry_run(args, s).memory.peak_total;
        },
        capacity, overhead, int64_t{1} << 20);
    report_search(j, "max_batch", "largest --per-device-eval-batch-size", r, device_memory,
                  capacity, overhead, "the search's bound");
  }
  if (x.find_max_seq_len) {
    // Over the prompt's length, the new tokens fixed: the context is prompt + max_new_tokens.
    const int64_t n_positions = args.model_config().shape.n_positions;
    FitSearchResult r = find_max_fit(
        [&](int64_t v) {
          InferenceShape s = shape;
          s.prompt_tokens = v;
          return inference_dry_run(args, s).memory.peak_total;
        },
        capacity, overhead, n_positions - shape.max_new_tokens);
    if (r.value > 0) r.value += shape.max_new_tokens;
    if (r.above > 0) r.above += shape.max_new_tokens;
    const std::string what =
        detail::concat("largest --seq-len (prompt + ", shape.max_new_tokens, " new tokens)");
    report_search(j, "max_seq_len", what, r, device_memory, capacity, overhead,
                  "the model's n_positions; --n-positions raises it");
  }
}

}  // namespace

void add_inference_flags(CLI::App* plan, InferenceFlags& f) {
  CLI::Option* on = plan->add_flag(
      "--inference", f.on,
      "Plan a generation instead of a training step: --per-device-eval-batch-size prompts, "
      "--seq-len tokens in all (prompt + --max-new-tokens), --num-beams; the model as `snug "
      "generate` builds it");
  const GenerationConfig defaults;
  f.max_new_tokens = defaults.max_new_tokens;
  f.num_beams = defaults.num_beams;
  add_max_new_tokens_flag(plan, f.max_new_tokens);
  plan->get_option("--max-new-tokens")->needs(on);
  add_num_beams_flag(plan, f.num_beams);
  plan->get_option("--num-beams")->needs(on);
}

int run_inference_plan(TrainingArguments args, const InferenceFlags& f,
                       const std::string& device_memory, bool all_gpus,
                       const std::string& json_path, const PlanExtras& extras) {
  const ModelConfig cfg = prepare_dry_run(args);
  SNUG_CHECK(!extras.advise,
             "--advise searches training configurations; it does not take --inference");
  const InferenceShape shape = inference_shape(args, f.max_new_tokens, f.num_beams);
  std::vector<MemoryEvent> events;
  const InferencePlan p =
      inference_dry_run(args, shape, extras.memory_timeline.empty() ? nullptr : &events);
  std::printf(
      "snug plan --inference: %s (%.2fM parameters), %s — dry run of a generation on meta\n\n",
      cfg.shape.name.c_str(), static_cast<double>(p.params) / 1e6,
      describe_generation(args, shape).c_str());
  std::printf("%s\n", memory_table(p.memory, std::nullopt).c_str());
  std::printf("weights   %s\n", weights_formula(args, p).c_str());
  std::printf("kv_cache  %s\n", kv_cache_formula(shape, p.kv).c_str());
  std::printf("          (2 x batch x layers x kv_heads x head_dim x context x bytes)\n\n");

  const std::vector<Verdict> verdicts = plan_verdicts(device_memory, all_gpus, p.memory.peak_total);
  for (const Verdict& v : verdicts) print_verdict(v);

  nlohmann::json j;
  if (extras.find_max_batch || extras.find_max_seq_len)
    find_max(extras, args, shape, device_memory, j);
  if (!extras.memory_timeline.empty()) {
    write_json_file(extras.memory_timeline, timeline_json(events, p.memory, "meta",
                                                          cfg.shape.name + ", generation of " +
                                                              describe_generation(args, shape)));
    std::printf("memory timeline (%zu events, one generation) written to %s\n", events.size(),
                extras.memory_timeline.c_str());
  }
  if (!json_path.empty()) {
    j["config"] = args.to_json();
    j["config"]["trainable_params"] = p.trainable_params;
    j["memory"] = dry_run_memory_json(p.memory);
    j["devices"] = nlohmann::json::array();
    for (const Verdict& v : verdicts) j["devices"].push_back(verdict_json(v));
    j["what_if"] = nlohmann::json::array();  // the switches are training's
    j["inference"] = inference_json(shape, p);
    write_json_file(json_path, j);
  }
  return 0;
}

}  // namespace snug::cli

// `snug generate`: text from a model with a KV cache (generate/generate.h), streamed to the
// terminal, then tokens/s and the memory table.
//   --prompt TEXT | --prompts FILE (one prompt per line)
//   --max-new-tokens, --do-sample, --temperature, --top-k, --top-p, --repetition-penalty,
//   --num-beams, --length-penalty, --early-stopping (false|true|never): transformers'
//   GenerationConfig names and defaults
//   --stop TOKEN (repeatable): more tokens that end a sequence, besides the tokenizer's eos
//   --checkpoint DIR: the values of a checkpoint folder (or an output dir's latest), as `snug
//   export` reads them
//   --adapter DIR: a PEFT LoRA adapter (peft/peft_adapter.h) on the --model weights; its r,
//   lora_alpha, target_modules and use_rslora replace the LoRA flags. Exclusive with --checkpoint
// It takes every training flag and builds the model as `snug train` does (--model, --init-from,
// --load-in-4bit..., --lora-r/--target-modules for a LoRA run's checkpoint, --seed). The tokenizer
// is --tokenizer, else the model folder's tokenizer.json, else bytes (the built-in corpus'
// tokenizer) when the vocabulary has 256 ids or more.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/number_flag.h"
#include "core/device.h"
#include "core/error.h"
#include "core/parallel.h"
#include "data/sft_data.h"
#include "data/tokenizer.h"
#include "data/tokenizers/unicode.h"
#include "generate/generate.h"
#include "io/excerpt.h"
#include "io/json_input.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "peft/peft_adapter.h"
#include "peft/peft_export.h"
#include "report/device_memory.h"
#include "report/report.h"
#include "train/model_setup.h"

namespace snug::cli {

namespace {

struct GenerateFlags {
  GenerationConfig gen;
  std::string prompt, prompts, checkpoint, adapter, early_stopping = "false";
  std::vector<std::string> stop;
};

// The text side: a tokenizer.json, or bytes.
struct TextCodec {
  std::optional<ModelTokenizer> tok;
  std::vector<int32_t> encode(const std::string& s) const {
    return tok ? tok->tokenizer.encode(s) : ByteTokenizer().encode(s);
  }
  std::string decode(const std::vector<int32_t>& ids) const {
    return tok ? tok->tokenizer.decode(ids, true) : ByteTokenizer().decode(ids);
  }
  std::optional<int32_t> id_of(const std::string& token) const {
    if (tok) return tok->tokenizer.token_to_id(token);
    if (token.size() == 1) return static_cast<unsigned char>(token[0]);
    return std::nullopt;
  }
};

TextCodec open_codec(const TrainingArguments& args, const ModelConfig& cfg) {
  namespace fs = std::filesystem;
  TextCodec c;
  std::string where = args.tokenizer;
  if (where.empty() && fs::is_directory(args.model) &&
      fs::exists(fs::path(args.model) / "tokenizer.json"))
    where = args.model;
  if (!where.empty()) {
    c.tok.emplace(ModelTokenizer::load(where));
    SNUG_CHECK(c.tok->tokenizer.vocab_size() <= cfg.shape.vocab_size, "snug generate: tokenizer '",
               c.tok->path, "' has ", c.tok->tokenizer.vocab_size(), " ids, more than ",
               cfg.shape.name, "'s vocabulary of ", cfg.shape.vocab_size);
    return c;
  }
  SNUG_CHECK(cfg.shape.vocab_size >= ByteTokenizer::kVocabSize, "snug generate: ", cfg.shape.name,
             " has no tokenizer.json; give --tokenizer (bytes need a vocabulary of 256 ids)");
  return c;
}

std::vector<std::string> read_prompts(const GenerateFlags& f) {
  SNUG_CHECK(f.prompt.empty() != f.prompts.empty(),
             "snug generate: give exactly one of --prompt and --prompts");
  if (!f.prompt.empty()) return {f.prompt};
  // A regular file of bounded size, as every other input: a FIFO blocked forever and /dev/zero
  // was read until memory ran out (issue 29).
  constexpr int64_t kMaxPromptsBytes = int64_t{1} << 30;
  const std::string text =
      read_input_file(f.prompts, "snug generate: --prompts '" + f.prompts + "'", kMaxPromptsBytes);
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(line);
  SNUG_CHECK(!out.empty(), "snug generate: --prompts '", f.prompts, "' has no prompt");
  return out;
}

int run_generate(const TrainingArguments& args, GenerateFlags f,
                 const std::optional<PeftAdapterConfig>& adapter) {
  args.validate();
  set_num_threads(args.threads);
  const ModelConfig cfg = args.model_config();
  GenerationConfig& g = f.gen;
  g.seed = args.seed;
  g.early_stopping = f.early_stopping == "true"    ? EarlyStopping::always
                     : f.early_stopping == "never" ? EarlyStopping::never
                                                   : EarlyStopping::heuristic;
  SNUG_CHECK(
      f.early_stopping == "true" || f.early_stopping == "false" || f.early_stopping == "never",
      "--early-stopping must be true, false or never, got '", excerpt(f.early_stopping), "'");
  const TextCodec codec = open_codec(args, cfg);
  if (codec.tok && !codec.tok->eos_token.empty())
    if (const auto id = codec.tok->tokenizer.token_to_id(codec.tok->eos_token))
      g.eos_token_ids.push_back(*id);
  for (const std::string& s : f.stop) {
    const auto id = codec.id_of(s);
    SNUG_CHECK(id.has_value(), "--stop '", excerpt(s), "' is not a token of the tokenizer");
    g.eos_token_ids.push_back(*id);
  }
  g.validate();
  const std::vector<std::string> prompts = read_prompts(f);

  const std::unique_ptr<Device> dev_owner = make_device(args.device);
  Device& dev = *dev_owner;
  dev.pool().set_capacity(args.device_memory);
  // In the dtype asked (--bf16: bf16 weights, no fp32 master; train/training_args.h).
  auto model = create_model(cfg, dev, args.generation_param_dtype(), args.weight_quant());
  std::string source = load_initial_weights(*model, args, cfg);
  // A PEFT adapter folder adds its LoRA (and loads it) before the generation setup.
  if (adapter) source = load_peft_adapter(*model, args, *adapter) + " on " + source;
  prepare_generation(*model, args);
  if (!f.checkpoint.empty()) source = load_checkpoint_values(*model, f.checkpoint, args);
  std::fprintf(stderr, "snug: generating with %s from %s\n", cfg.shape.name.c_str(),
               source.c_str());

  int64_t total = 0;
  double seconds = 0;
  nlohmann::json per_prompt = nlohmann::json::array();
  for (const std::string& p : prompts) {
    const std::vector<int32_t> ids = codec.encode(p);
    std::printf("%s", p.c_str());
    std::fflush(stdout);
    std::vector<int32_t> out;
    std::string shown;
    const auto t0 = std::chrono::steady_clock::now();
    const GenerationResult r = generate(*model, ids, g, [&](int32_t t) {
      out.push_back(t);
      const std::string text = codec.decode(out);
      // Print what decoding added (a multi-byte character appears once it is complete).
      if (text.size() > shown.size() && text.compare(0, shown.size(), shown) == 0) {
        std::printf("%s", text.substr(shown.size()).c_str());
        std::fflush(stdout);
        shown = text;
      }
    });
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    total += static_cast<int64_t>(r.tokens.size());
    std::printf("\n");
    std::fflush(stdout);
    per_prompt.push_back(
        {{"prompt_tokens", ids.size()},
         {"new_tokens", r.tokens.size()},
         {"stopped_at_eos", r.stopped_at_eos},
         {"kv_cache_bytes", r.kv_cache_bytes},
         {"tokens", r.tokens},
         // JSON holds UTF-8 only: ill-formed bytes (a byte vocabulary's) as U+FFFD.
         {"text", tok::utf8_lossy(codec.decode(r.tokens))}});
    std::fprintf(stderr, "snug: %zu new tokens%s; KV cache %lld bytes\n", r.tokens.size(),
                 r.stopped_at_eos ? " (stopped at eos)" : "",
                 static_cast<long long>(r.kv_cache_bytes));
  }
  std::fprintf(stderr, "snug: %lld tokens in %.3f s, %.1f tokens/s\n",
               static_cast<long long>(total), seconds, seconds > 0 ? total / seconds : 0.0);
  std::fprintf(stderr, "\n%s", memory_table(dev.pool().stats(), args.device_memory).c_str());
  std::fprintf(stderr, "%s", device_memory_lines(dev).c_str());
  if (!args.report_json.empty()) {
    // docs/report.md, "snug generate": the run's memory as training reports it, and per prompt.
    nlohmann::json j = {
        {"config", args.to_json()},
        {"system", system_info(args.gemm_path, args.device)},
        {"memory", memory_json(dev.pool().stats(), args.device_memory)},
        {"generation",
         {{"prompts", per_prompt},
          {"new_tokens", total},
          {"seconds", seconds},
          {"tokens_per_second", seconds > 0 ? static_cast<double>(total) / seconds : 0.0}}}};
    add_device_memory(j["memory"], dev);
    write_json_file(args.report_json, j);
    std::fprintf(stderr, "report written to %s\n", args.report_json.c_str());
  }
  return 0;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  const auto c = add_training_subcommand(
      app, "generate",
      "Generate text with a KV cache (greedy, sampling, beam search); give it the model's flags");
  CLI::App* sub = c.sub;
  auto f = std::make_shared<GenerateFlags>();
  sub->add_option("--prompt", f->prompt, "The prompt text");
  sub->add_option("--prompts", f->prompts, "A file of prompts, one per line");
  add_max_new_tokens_flag(sub, f->gen.max_new_tokens);
  sub->add_flag("--do-sample", f->gen.do_sample, "Sample instead of greedy decoding");
  // A temperature or penalty near 0 divides the logits past float's range (inf, then NaN).
  add_number_flag(sub, "--temperature", f->gen.temperature, NumberRange::real(1e-4, 1e4),
                  "Sampling temperature");
  add_number_flag(sub, "--top-k", f->gen.top_k, NumberRange::integer(0, kMaxFlagCount),
                  "Sampling: keep the k most likely tokens (0 off)");
  add_number_flag(sub, "--top-p", f->gen.top_p, NumberRange::real(0, 1, true, false),
                  "Sampling: nucleus probability (1: off)");
  add_number_flag(sub, "--repetition-penalty", f->gen.repetition_penalty,
                  NumberRange::real(1e-4, 1e4),
                  "CTRL's penalty on tokens already in the sequence (1: off)");
  add_num_beams_flag(sub, f->gen.num_beams);
  add_number_flag(sub, "--length-penalty", f->gen.length_penalty, NumberRange::real(-100, 100),
                  "Beam search: score / length^penalty");
  sub->add_option("--early-stopping", f->early_stopping,
                  "Beam search: false (heuristic), true or never (default false)");
  sub->add_option("--stop", f->stop, "A token that ends generation (repeatable)");
  sub->add_option("--checkpoint", f->checkpoint,
                  "Read the values from this checkpoint folder, or an output dir's latest");
  sub->add_option("--adapter", f->adapter,
                  "A PEFT LoRA adapter folder (adapter_config.json, adapter_model.safetensors) "
                  "on the --model weights; its r, alpha and targets replace the LoRA flags");
  return {sub, [t = c.flags, f, sub] {
            SNUG_CHECK(f->adapter.empty() || f->checkpoint.empty(),
                       "snug generate: --adapter and --checkpoint are exclusive (a checkpoint has "
                       "its own adapters)");
            TrainingArguments args = t->args;
            std::optional<PeftAdapterConfig> adapter;
            if (!f->adapter.empty()) {
              adapter = read_peft_adapter_config(f->adapter);
              adopt_peft_adapter(args, *adapter,
                                 [sub](const std::string& flag) { return sub->count(flag) > 0; });
            }
            return run_generate(args, *f, adapter);
          }};
}

}  // namespace snug::cli

#include "train/run_record.h"

#include <cstdio>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "models/gpt2_config.h"
#include "train/checkpoint.h"

namespace snug {

namespace {

struct Field {
  const char* key;
  const char* flag;
};

// The record's fields in the order they are checked, each with the flag that sets it.
constexpr Field kFields[] = {
    {"model.name", "--model"},
    {"model.n_layer", "--n-layer"},
    {"model.n_embd", "--n-embd"},
    {"model.n_head", "--n-head"},
    {"model.vocab_size", "--vocab-size"},
    {"model.n_positions", "--n-positions"},
    {"model.param_dtype", "--bf16-full"},
    {"model.lora_r", "--lora-r"},
    {"model.lora_alpha", "--lora-alpha"},
    {"model.target_modules", "--target-modules"},
    {"model.use_rslora", "--use-rslora"},
    {"model.freeze", "--freeze"},
    {"data.source", "--data"},
    {"data.fnv1a64", "--data"},
    {"seq_len", "--seq-len"},
    {"optimizer.name", "--optim"},
    {"optimizer.adam_beta1", "--adam-beta1"},
    {"optimizer.adam_beta2", "--adam-beta2"},
    {"optimizer.adam_epsilon", "--adam-epsilon"},
    {"optimizer.weight_decay", "--weight-decay"},
    {"optimizer.momentum", "--momentum"},
    {"optimizer.optim_8bit_embeddings", "--optim-8bit-embeddings"},
    {"optimizer.adafactor_relative_step", "--adafactor-relative-step"},
    {"optimizer.galore_rank", "--galore-rank"},
    {"optimizer.galore_update_proj_gap", "--galore-update-proj-gap"},
    {"optimizer.galore_scale", "--galore-scale"},
    {"quantized_base",
     "--load-in-8bit/--load-in-4bit/--bnb-4bit-quant-type/"
     "--bnb-4bit-use-double-quant"},
    {"seed", "--seed"},
    {"started_from", "--init-from"},
};

// TrainingArguments::to_json() keys the record covers (compared there, not as config changes),
// and paths that differ on every resume. The --data path is a config change: a data file may
// move as long as its content hash (in the record) is the same.
// clang-format off
const std::set<std::string> kNotConfigChanges = {
    "model", "model_shape", "seq_len", "seed", "bf16_full", "freeze",
    "optim", "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay", "momentum",
    "optim_8bit_embeddings", "adafactor_relative_step", "galore_rank", "galore_update_proj_gap",
    "galore_scale",
    "lora_r", "lora_alpha", "target_modules", "use_rslora",
    "load_in_8bit", "load_in_4bit", "bnb_4bit_quant_type", "bnb_4bit_use_double_quant", "qlora",
    "resume_from", "init_from", "report_json"};
// clang-format on

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// record["a.b"] for a dotted key (a missing field is null).
nlohmann::json field(const nlohmann::json& record, const std::string& key) {
  const nlohmann::json* j = &record;
  size_t from = 0;
  while (true) {
    const size_t dot = key.find('.', from);
    const std::string part = key.substr(from, dot == std::string::npos ? dot : dot - from);
    if (!j->is_object() || !j->contains(part)) return nullptr;
    j = &(*j)[part];
    if (dot == std::string::npos) return *j;
    from = dot + 1;
  }
}

}  // namespace

nlohmann::json make_run_record(const TrainingArguments& args) {
  const GPT2Config cfg = args.model_config();
  nlohmann::json r;
  r["model"] = {
      {"name", args.model},  // as given; the resolved shape follows
      {"n_layer", cfg.n_layer},
      {"n_embd", cfg.n_embd},
      {"n_head", cfg.n_head},
      {"vocab_size", cfg.vocab_size},
      {"n_positions", cfg.n_positions},
      {"param_dtype", dtype_name(args.param_dtype())},
      {"lora_r", args.lora_r},
      {"lora_alpha", args.lora_r > 0 ? nlohmann::json(args.lora_alpha) : nullptr},
      {"target_modules",
       args.lora_r > 0 ? nlohmann::json(parse_target_modules(args.target_modules)) : nullptr},
      {"use_rslora", args.lora_r > 0 && args.use_rslora},
      {"freeze", args.freeze}};
  const bool file = args.data != "builtin" && args.data != "dummy";
  r["data"] = {{"source", file ? "file" : args.data},
               {"fnv1a64", file ? nlohmann::json(hex64(fnv1a64_file(args.data))) : nullptr}};
  r["seq_len"] = args.seq_len;
  r["optimizer"] = {{"name", args.optim},
                    {"adam_beta1", args.adam_beta1},
                    {"adam_beta2", args.adam_beta2},
                    {"adam_epsilon", args.adam_epsilon},
                    {"weight_decay", args.weight_decay},
                    {"momentum", args.momentum},
                    {"optim_8bit_embeddings", args.optim_8bit_embeddings},
                    {"adafactor_relative_step", args.adafactor_relative_step},
                    {"galore_rank", args.galore_rank},
                    {"galore_update_proj_gap", args.galore_update_proj_gap},
                    {"galore_scale", args.galore_scale}};
  const auto wq = args.weight_quant();
  r["quantized_base"] = wq ? nlohmann::json(wq->resolved().describe()) : nullptr;
  r["seed"] = args.seed;
  r["started_from"] =
      args.init_from.empty()
          ? nlohmann::json(nullptr)
          : nlohmann::json{{"init_from", std::filesystem::absolute(args.init_from).string()},
                           {"fnv1a64", hex64(fnv1a64_file(args.init_from))}};
  return r;
}

void check_same_run(const nlohmann::json& saved, const nlohmann::json& current,
                    const std::string& where) {
  for (const Field& f : kFields) {
    const nlohmann::json a = field(saved, f.key), b = field(current, f.key);
    SNUG_CHECK(a == b, where, ": the checkpoint's run has ", f.key, " ", a.dump(), ", this run ",
               b.dump(), " (", f.flag,
               "); resuming would continue from a state that does not fit it. Give the run's ",
               f.flag, ", or start a new run");
  }
}

bool same_run(const nlohmann::json& a, const nlohmann::json& b) {
  for (const Field& f : kFields)
    if (field(a, f.key) != field(b, f.key)) return false;
  return true;
}

std::vector<std::string> config_changes(const nlohmann::json& saved_config,
                                        const nlohmann::json& current_config) {
  std::vector<std::string> out;
  if (!saved_config.is_object() || !current_config.is_object()) return out;
  for (const auto& [key, now] : current_config.items()) {
    if (kNotConfigChanges.count(key) != 0) continue;
    const nlohmann::json before = saved_config.contains(key) ? saved_config[key] : nullptr;
    if (before != now) out.push_back(key + " " + before.dump() + " -> " + now.dump());
  }
  return out;
}

}  // namespace snug

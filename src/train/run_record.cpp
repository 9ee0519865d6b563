#include "train/run_record.h"

#include <cstdio>
#include <set>

#include "core/error.h"
#include "io/excerpt.h"

namespace snug {

namespace {

struct Field {
  const char* key;
  const char* flag;
};

// The record's fields in the order they are checked, each with the flag that sets it. This file
// reads only JSON (the trainer_state fuzz target links it without the engine), so it names the
// flags itself rather than through train/flag_table.h; tests/train/flag_table_test.cpp holds
// the optimizer's fields here and in kNotConfigChanges to the table's optimizer_record entries.
constexpr Field kFields[] = {
    {"model.name", "--model"},
    {"model.n_layer", "--n-layer"},
    {"model.n_embd", "--n-embd"},
    {"model.n_head", "--n-head"},
    {"model.vocab_size", "--vocab-size"},
    {"model.n_positions", "--n-positions"},
    {"model.param_dtype", "--bf16-full/--torch-dtype"},
    {"model.lora_r", "--lora-r"},
    {"model.lora_alpha", "--lora-alpha"},
    {"model.target_modules", "--target-modules"},
    {"model.use_rslora", "--use-rslora"},
    {"model.freeze", "--freeze"},
    {"model_files.config", "--model (its config.json)"},
    {"model_files.generation_config", "--model (its generation_config.json)"},
    {"model_files.tokenizer", "--model/--tokenizer (tokenizer.json)"},
    {"model_files.tokenizer_config", "--model/--tokenizer (tokenizer_config.json)"},
    {"model_files.special_tokens_map", "--model/--tokenizer (special_tokens_map.json)"},
    {"model_files.weights", "--model (its weight shards)"},
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
    {"optimizer.precision_layout", "--precision-layout"},
    {"quantized_base",
     "--load-in-8bit/--load-in-4bit/--bnb-4bit-quant-type/"
     "--bnb-4bit-use-double-quant"},
    {"seed", "--seed"},
    {"started_from", "--init-from/--model"},
};

// TrainingArguments::to_json() keys the record covers (compared there, not as config changes),
// and paths that differ on every resume. The --data path is a config change: a data file may
// move as long as its content hash (in the record) is the same.
// clang-format off
const std::set<std::string> kNotConfigChanges = {
    "model", "model_shape", "seq_len", "seed", "bf16_full", "torch_dtype", "freeze",
    "optim", "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay", "momentum",
    "optim_8bit_embeddings", "adafactor_relative_step", "galore_rank", "galore_update_proj_gap",
    "galore_scale", "precision_layout",
    "lora_r", "lora_alpha", "target_modules", "use_rslora",
    "load_in_8bit", "load_in_4bit", "bnb_4bit_quant_type", "bnb_4bit_use_double_quant", "qlora",
    "resume_from", "init_from", "report_json"};
// clang-format on

// Fields a record of an earlier snug lacks, with the value such a run had: a checkpoint from
// before --precision-layout was snug's layout.
nlohmann::json with_default(const std::string& key, nlohmann::json v) {
  if (v.is_null() && key == "optimizer.precision_layout") return "snug";
  return v;
}

// A value of a record for a message: records come from files (untrusted), so long values are
// quoted as an excerpt (io/excerpt.h).
std::string shown(const nlohmann::json& v) {
  return excerpt(v.dump(), 80);
}

// A string of a record as it is (an excerpt), anything else as shown().
std::string shown_text(const nlohmann::json& v) {
  return v.is_string() ? excerpt(v.get<std::string>()) : shown(v);
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

// A checkpoint of an earlier snug has no "model_files" record, or one without "weights" (it
// recorded the weights by a hash of every byte, under started_from): those fields are not
// compared.
bool compared(const Field& f, const nlohmann::json& a, const nlohmann::json& b) {
  const std::string key = f.key;
  if (key.rfind("model_files.", 0) != 0) return true;
  const bool both = a.is_object() && b.is_object() && a.contains("model_files") &&
                    b.contains("model_files") && a["model_files"].is_object() &&
                    b["model_files"].is_object();
  if (!both || key != "model_files.weights") return both;
  return a["model_files"].contains("weights") && b["model_files"].contains("weights");
}

// The first shard of `saved` that differs in `now` (two lists of {name, size, header_fnv1a64}),
// said as "weight shard NAME: ..."; "" when the lists are not both such lists (the record is the
// file's: the generic message shows it).
std::string shard_change(const nlohmann::json& saved, const nlohmann::json& now) {
  auto valid = [](const nlohmann::json& list) {
    if (!list.is_array()) return false;
    for (const nlohmann::json& s : list)
      if (!s.is_object() || !s.contains("name") || !s["name"].is_string()) return false;
    return true;
  };
  if (!valid(saved) || !valid(now)) return "";
  auto find = [](const nlohmann::json& list, const nlohmann::json& name) -> const nlohmann::json* {
    for (const nlohmann::json& s : list)
      if (s["name"] == name) return &s;
    return nullptr;
  };
  auto value = [](const nlohmann::json& s, const char* key) {
    return s.contains(key) ? s[key] : nlohmann::json();
  };
  for (const nlohmann::json& a : saved) {
    const std::string name = "weight shard " + excerpt(a["name"].get<std::string>()) + ": ";
    const nlohmann::json* b = find(now, a["name"]);
    if (b == nullptr) return name + "no longer in the folder";
    if (value(a, "size") != value(*b, "size"))
      return name + shown(value(a, "size")) + " bytes, now " + shown(value(*b, "size"));
    if (value(a, "header_fnv1a64") != value(*b, "header_fnv1a64"))
      return name + "its safetensors header differs (fnv1a64 " +
             shown_text(value(a, "header_fnv1a64")) + ", now " +
             shown_text(value(*b, "header_fnv1a64")) +
             "): a tensor renamed, retyped, reshaped or moved";
    if (a != *b) return name + "its record differs";
  }
  for (const nlohmann::json& b : now)
    if (find(saved, b["name"]) == nullptr)
      return "weight shard " + excerpt(b["name"].get<std::string>()) +
             ": not in the checkpoint's run";
  return "";
}

}  // namespace

void check_same_run(const nlohmann::json& saved, const nlohmann::json& current,
                    const std::string& where) {
  for (const Field& f : kFields) {
    if (!compared(f, saved, current)) continue;
    const nlohmann::json a = with_default(f.key, field(saved, f.key)),
                         b = with_default(f.key, field(current, f.key));
    if (a == b) continue;
    const std::string shards =
        std::string(f.key) == "model_files.weights" ? shard_change(a, b) : std::string();
    const std::string differs = shards.empty()
                                    ? detail::concat(shown(a), ", this run ", shown(b))
                                    : detail::concat("that differ from this run's: ", shards);
    throw Error(detail::concat(
        where, ": the checkpoint's run has ", f.key, " ", differs, " (", f.flag,
        "); resuming would continue from a state that does not fit it. Give the run's ", f.flag,
        ", or start a new run"));
  }
}

bool same_run(const nlohmann::json& a, const nlohmann::json& b) {
  for (const Field& f : kFields)
    if (compared(f, a, b) &&
        with_default(f.key, field(a, f.key)) != with_default(f.key, field(b, f.key)))
      return false;
  return true;
}

std::vector<std::string> config_changes(const nlohmann::json& saved_config,
                                        const nlohmann::json& current_config) {
  std::vector<std::string> out;
  if (!saved_config.is_object() || !current_config.is_object()) return out;
  for (const auto& [key, now] : current_config.items()) {
    if (kNotConfigChanges.count(key) != 0) continue;
    const nlohmann::json before = saved_config.contains(key) ? saved_config[key] : nullptr;
    if (before != now) out.push_back(key + " " + shown(before) + " -> " + shown(now));
  }
  return out;
}

}  // namespace snug

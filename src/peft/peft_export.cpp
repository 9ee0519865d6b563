#include "peft/peft_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/excerpt.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "models/registry.h"
#include "peft/peft_adapter.h"
#include "train/checkpoint.h"
#include "train/flag_table.h"
#include "train/quantized_base_file.h"

namespace snug {

namespace fs = std::filesystem;

namespace {

// The checkpoint's record of model.safetensors (size, FNV-1a 64) against the file itself.
void verify_model_file(const fs::path& dir, const TrainerState& state) {
  verify_checkpoint_file(dir.string(), kCheckpointModelFile, state.files);
}

// The run's flags that change the exported values must be this export's: a different
// --lora-alpha or --use-rslora would silently rescale every adapter, a different quantization
// would merge into another base. (Rank, targets and shapes would also fail on tensor shapes or
// names, but one message naming the flag is clearer.) Keys absent from an older checkpoint are
// not checked.
void check_run_config(const nlohmann::json& saved, const TrainingArguments& args,
                      const std::string& state_path) {
  const nlohmann::json mine = args.to_json();
  auto differs = [&](const nlohmann::json& a, const nlohmann::json& b, const std::string& key) {
    if (key == "target_modules" && a.is_string() && b.is_string()) {
      // Empty: the model type's default (the model itself is checked to be the same).
      auto targets = [&](const nlohmann::json& t) {
        const std::string text = t.get<std::string>();
        return parse_target_modules(
            !text.empty()
                ? text
                : architecture(args.model_config().shape.model_type).default_lora_targets);
      };
      return a != b && targets(a) != targets(b);
    }
    return a != b;
  };
  // `key` of the config (in `s` and `m`), named by its flag (train/flag_table.h).
  auto check = [&](const nlohmann::json& s, const nlohmann::json& m, const std::string& key,
                   const std::string& config_key) {
    if (!s.contains(key) || !m.contains(key) || !differs(s[key], m[key], key)) return;
    const std::string flag = flag_for_key(config_key).name();
    SNUG_CHECK(false, state_path, ": the run was trained with ", flag, " ", excerpt(s[key].dump()),
               " but this export has ", flag, " ", excerpt(m[key].dump()),
               "; pass `snug export` the flags of the run");
  };
  for (const char* key : {"model", "config_override", "lora_r", "lora_alpha", "use_rslora",
                          "target_modules", "load_in_8bit", "load_in_4bit"})
    check(saved, mine, key, key);
  if (args.load_in_4bit)
    for (const char* key : {"bnb_4bit_quant_type", "bnb_4bit_use_double_quant"})
      check(saved, mine, key, key);
  if (saved.contains("model_shape") && mine.contains("model_shape"))
    for (const TrainingFlag& f : training_flags())  // every shape flag
      if (f.key.rfind("model_shape.", 0) == 0)
        check(saved["model_shape"], mine["model_shape"], f.key.substr(12), f.key);
}

// PEFT writes lora_alpha as the int it was given (8), a float only when it is one (3.5).
nlohmann::json number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 9.0e15) return static_cast<int64_t>(v);
  return v;
}

}  // namespace

int64_t load_values_by_name(Model& model, const std::string& path) {
  const SafetensorsFile f(path);
  const std::string name_of_model = model.summary().name;
  std::set<const Parameter*> loaded;
  for (const std::string& name : f.names()) {
    Parameter* p = model.find(name);
    SNUG_CHECK(p != nullptr, path, ": tensor '", excerpt(name), "' is not a parameter of ",
               name_of_model, model.lora_adapters().empty() ? "" : " with these LoRA adapters",
               "; give the flags of the run that wrote it (--model, --lora-r, --target-modules)");
    SNUG_CHECK(!p->quantized(), path, ": tensor '", excerpt(name),
               "' is stored there, but this model keeps it quantized (--load-in-8bit/"
               "--load-in-4bit); give the flags of the run that wrote it");
    const SafetensorsFile::Info& inf = f.info(name);
    SNUG_CHECK(inf.shape == p->value.shape(), path, ": tensor '", excerpt(name), "' has shape ",
               shape_str(inf.shape), ", ", name_of_model, " needs ", shape_str(p->value.shape()),
               " (--lora-r, --model and the shape flags must be the run's)");
    SNUG_CHECK(inf.dtype == "F32" || inf.dtype == "F16" || inf.dtype == "BF16", path, ": tensor '",
               excerpt(name), "' is ", inf.dtype, "; weights must be F32, F16 or BF16");
    f.read_into(name, p->value);
    loaded.insert(p);
  }
  for (const LoraAdapter& ad : model.lora_adapters())
    for (const Parameter* p : {ad.A, ad.B})
      SNUG_CHECK(loaded.count(p) != 0, path, ": no tensor '", p->name,
                 "': the run had no LoRA adapter on ", ad.module,
                 " (--lora-r and --target-modules must be the run's)");
  return static_cast<int64_t>(loaded.size());
}

std::string load_checkpoint_values(Model& model, const std::string& dir,
                                   const TrainingArguments& args) {
  std::error_code ec;
  SNUG_CHECK(fs::is_directory(dir, ec), "--checkpoint ", dir, ": no such directory");
  fs::path ckpt;
  try {
    ckpt = resolve_checkpoint(dir);
  } catch (const Error& e) {
    // resolve_checkpoint speaks of --resume-from, its flag in `snug train`.
    std::string msg = e.what();
    const std::string flag = "--resume-from";
    if (msg.rfind(flag, 0) == 0) msg = "--checkpoint" + msg.substr(flag.size());
    throw Error(msg);
  }
  const std::string state_path = (ckpt / kTrainerStateFile).string();
  const TrainerState state = read_trainer_state(ckpt.string());
  verify_model_file(ckpt, state);
  check_run_config(state.config, args, state_path);
  load_values_by_name(model, (ckpt / kCheckpointModelFile).string());
  // The quantized base the run trained on, not the one --init-from or the seed gave this export.
  if (has_quantized_base(model)) {
    verify_checkpoint_file(ckpt.string(), kQuantizedBaseFile, state.files);
    load_quantized_base((ckpt / kQuantizedBaseFile).string(), model);
  }
  return ckpt.string();
}

nlohmann::json peft_adapter_config(const Model& model) {
  SNUG_CHECK(!model.lora_adapters().empty(), "the model has no LoRA adapters (--lora-r 0)");
  const LoraConfig& c = model.lora_config();
  // PEFT stores target_modules as a set (written as a list); "all-linear" is resolved to the
  // adapted modules' names before save_pretrained writes it.
  std::set<std::string> targets;
  const bool all_linear = std::find(c.target_modules.begin(), c.target_modules.end(),
                                    "all-linear") != c.target_modules.end();
  if (all_linear)
    for (const LoraAdapter& ad : model.lora_adapters()) targets.insert(ad.module);
  else
    targets.insert(c.target_modules.begin(), c.target_modules.end());
  using J = nlohmann::json;
  // This run's LoRA, then PEFT's LoraConfig defaults for the features snug does not use, as
  // save_pretrained writes them (a json object keeps its keys sorted, as PEFT's file has them).
  J j = J::object();
  j["bias"] = "none";
  j["fan_in_fan_out"] = model.lora_adapters().front().fan_in_fan_out;
  j["lora_alpha"] = number(c.alpha);
  j["lora_dropout"] = c.dropout;
  j["megatron_core"] = "megatron.core";
  j["peft_type"] = "LORA";
  j["peft_version"] = kPeftFormatVersion;
  j["qalora_group_size"] = 16;
  j["r"] = c.r;
  j["target_modules"] = J(std::vector<std::string>(targets.begin(), targets.end()));
  // PEFT's task type and the modules it keeps trainable for it (models/model_config.h).
  const char* task_type = peft_task_type(model.task());
  j["task_type"] = task_type != nullptr ? J(task_type) : J(nullptr);
  const std::vector<std::string>& to_save = peft_modules_to_save(model.task());
  j["modules_to_save"] = to_save.empty() ? J(nullptr) : J(to_save);
  j["use_rslora"] = c.use_rslora;
  for (const char* key :
       {"alora_invocation_tokens", "arrow_config", "auto_mapping", "base_model_name_or_path",
        "corda_config", "eva_config", "exclude_modules", "kasa_config", "layer_replication",
        "layers_pattern", "layers_to_transform", "lora_ga_config", "megatron_config",
        "monteclora_config", "revision", "target_parameters", "trainable_token_indices",
        "use_bdlora", "velora_config"})
    j[key] = nullptr;
  for (const char* key : {"alpha_pattern", "loftq_config", "rank_pattern"}) j[key] = J::object();
  for (const char* key : {"ensure_weight_tying", "lora_bias", "use_dora", "use_qalora"})
    j[key] = false;
  for (const char* key : {"inference_mode", "init_lora_weights"}) j[key] = true;
  return j;
}

void save_peft_adapter(const Model& model, const std::string& dir) {
  SNUG_CHECK(!model.device().is_meta(), "cannot write an adapter to '", dir,
             "' from a model on the meta device (it has no values)");
  const nlohmann::json config = peft_adapter_config(model);
  std::error_code ec;
  fs::create_directories(dir, ec);
  SNUG_CHECK(!ec, dir, ": cannot create the adapter directory: ", ec.message());
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  for (const LoraAdapter& ad : model.lora_adapters()) {
    for (const Parameter* p : {ad.A, ad.B}) {
      SNUG_CHECK(p->value.dtype() == DType::f32, p->name,
                 ": adapters are written as F32, this one is ", dtype_name(p->value.dtype()));
      tensors.emplace_back(kPeftPrefix + p->name, &p->value);
    }
  }
  // The task's modules_to_save (a classifier), whole, under their own names as PEFT's
  // get_peft_model_state_dict writes them.
  for (const std::string& module : peft_modules_to_save(model.task()))
    for (const Parameter* p : model.parameters()) {
      if (p->name.rfind(module + ".", 0) != 0 ||
          p->name.find('.', module.size() + 1) != std::string::npos)
        continue;
      SNUG_CHECK(p->value.dtype() == DType::f32, p->name,
                 ": modules_to_save are written as F32, this one is ",
                 dtype_name(p->value.dtype()));
      tensors.emplace_back(kPeftPrefix + p->name, &p->value);
    }
  save_safetensors((fs::path(dir) / kPeftWeightsFile).string(), tensors, {{"format", "pt"}});
  const fs::path cfg_path = fs::path(dir) / kPeftConfigFile;
  write_output_file(cfg_path.string(), config.dump(2) + "\n", cfg_path.string());
}

std::vector<HfTensor> merged_tensors(const Model& model) {
  std::vector<HfTensor> out = hf_model_tensors(model);  // every parameter but the adapters
  for (HfTensor& t : out) {
    const Parameter* p = model.find(t.name);
    for (const LoraAdapter& a : model.lora_adapters())
      if (a.base == p)
        t.values = [&model, &a](float* dst) {
          const std::vector<float> w = model.merged_weight(a);
          std::copy(w.begin(), w.end(), dst);
        };
  }
  return out;
}

void save_merged_weights(const Model& model, const std::string& path,
                         const std::map<std::string, std::string>& extra) {
  SNUG_CHECK(!model.device().is_meta(), "cannot write merged weights to '", path,
             "' from a model on the meta device (it has no values)");
  // Streamed: one merged (or dequantized, or widened) tensor at a time, never the whole model a
  // second time in fp32.
  const std::vector<HfTensor> tensors = merged_tensors(model);
  std::vector<SafetensorsEntry> entries;
  for (const HfTensor& t : tensors) entries.push_back({t.name, DType::f32, t.shape});
  std::map<std::string, std::string> meta = model.weights_metadata();
  for (const auto& [k, v] : extra) meta[k] = v;
  save_safetensors_streamed(path, entries, meta, [&](size_t i, void* dst) {
    tensors[i].values(static_cast<float*>(dst));
  });
}

}  // namespace snug

#include "models/registry.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "core/error.h"
#include "io/excerpt.h"
#include "io/json_input.h"
#include "models/config_override.h"

namespace snug {

// Each family defines its entry in its own folder.
const Architecture& gpt2_architecture();
const Architecture& bert_architecture();
const Architecture& llama_architecture();
const Architecture& mistral_architecture();
const Architecture& qwen2_architecture();
const Architecture& gpt_neox_architecture();

namespace {

std::vector<const Architecture*>& registered() {
  static std::vector<const Architecture*> all = {
      &gpt2_architecture(),  &llama_architecture(),    &mistral_architecture(),
      &qwen2_architecture(), &gpt_neox_architecture(), &bert_architecture(),
  };
  return all;
}

}  // namespace

const std::vector<const Architecture*>& architectures() {
  return registered();
}

void register_architecture(const Architecture& a) {
  const std::string type = a.model_type;
  SNUG_CHECK(!type.empty() && a.parse && a.create && a.flops_per_token && a.layer_activation_bytes,
             "register_architecture: '", type,
             "' needs a model_type, parse, create, flops_per_token and layer_activation_bytes");
  SNUG_CHECK(a.presets.empty() || a.preset_config, "register_architecture: '", type,
             "' has presets but no preset_config");
  for (const Architecture* r : registered())
    SNUG_CHECK(type != r->model_type, "register_architecture: model_type '", type,
               "' is registered already");
  registered().push_back(&a);
}

void unregister_architecture(const Architecture& a) {
  std::vector<const Architecture*>& all = registered();
  all.erase(std::remove(all.begin(), all.end(), &a), all.end());
}

const char* task_name(ModelTask t) {
  switch (t) {
    case ModelTask::causal_lm:
      return "causal-lm";
    case ModelTask::masked_lm:
      return "masked-lm";
    case ModelTask::sequence_classification:
      return "sequence-classification";
  }
  return "?";
}

const char* peft_task_type(ModelTask t) {
  switch (t) {
    case ModelTask::causal_lm:
      return "CAUSAL_LM";
    case ModelTask::sequence_classification:
      return "SEQ_CLS";
    case ModelTask::masked_lm:
      return nullptr;
  }
  return nullptr;
}

const std::vector<std::string>& peft_modules_to_save(ModelTask t) {
  static const std::vector<std::string> none, heads = {"classifier", "score"};
  return t == ModelTask::sequence_classification ? heads : none;
}

ModelTask parse_task(const std::string& name, const std::string& where) {
  for (ModelTask t :
       {ModelTask::causal_lm, ModelTask::masked_lm, ModelTask::sequence_classification})
    if (name == task_name(t)) return t;
  throw Error(detail::concat(where, ": unknown task '", excerpt(name),
                             "' (causal-lm, masked-lm or sequence-classification)"));
}

ModelConfig shape_config(ModelSummary shape, int64_t num_params, nlohmann::json hf) {
  ModelConfig m;
  m.shape = std::move(shape);
  m.num_params = num_params;
  m.hf = std::move(hf);
  return m;
}

namespace {

std::string supported_types() {
  std::string s;
  for (const Architecture* a : architectures())
    s += std::string(s.empty() ? "" : ", ") + a->model_type;
  return s;
}

}  // namespace

const Architecture& architecture(const std::string& model_type, const std::string& where) {
  for (const Architecture* a : architectures())
    if (model_type == a->model_type) return *a;
  throw Error(detail::concat(where, where.empty() ? "" : ": ", "model_type '", excerpt(model_type),
                             "' is not supported yet (supported: ", supported_types(), ")"));
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> v;
  for (const Architecture* a : architectures())
    for (const auto& [name, alias] : a->presets) v.push_back(name);
  return v;
}

namespace {

// A config.json's text, `spec` naming it in messages, `name` the model it describes.
ModelConfig parse_config_text(std::string_view text, const std::string& spec,
                              const std::string& name) {
  const nlohmann::json j = parse_json_input(text, spec);
  SNUG_CHECK(j.is_object(), spec, ": a config.json must be a JSON object");
  std::string type = "gpt2";  // older GPT-2 config.json files carry no model_type
  if (j.contains("model_type")) {
    SNUG_CHECK(j["model_type"].is_string(), spec, ": key 'model_type' must be a string");
    type = j["model_type"].get<std::string>();
  }
  return architecture(type, spec).parse(j, spec, name);
}

}  // namespace

ModelConfig parse_model_config(std::string_view text, const std::string& spec) {
  return parse_config_text(text, spec, spec);
}

ModelConfig resolve_model(const std::string& spec, const ModelShapeOverrides& o,
                          const std::vector<std::string>& config_overrides) {
  ModelConfig c;
  const Architecture* arch = nullptr;
  for (const Architecture* a : architectures())
    for (const auto& [name, alias] : a->presets)
      if (arch == nullptr && (spec == name || (!alias.empty() && spec == alias))) {
        arch = a;
        c = a->parse(a->preset_config(name), name, name);
      }
  if (arch == nullptr) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(spec, ec)) {
      std::string names;
      for (const std::string& n : model_preset_names())
        names += std::string(names.empty() ? "" : ", ") + n;
      throw Error("unknown model '" + excerpt(spec) + "': not a preset (" + names +
                  "), a config.json file or a Hugging Face model folder");
    }
    std::string config_path = spec;
    if (fs::is_directory(spec, ec)) {
      config_path = (fs::path(spec) / "config.json").string();
      SNUG_CHECK(fs::is_regular_file(config_path, ec), "model folder ", spec,
                 " has no config.json (a Hugging Face model folder holds config.json and "
                 "model.safetensors or model.safetensors.index.json with its shards)");
    }
    // A folder's model is named by the folder; messages about its keys name the file.
    c = parse_config_text(read_input_file(config_path, config_path, int64_t{1} << 24), config_path,
                          spec);
    c.config_path = config_path;
    if (config_path != spec) c.folder = spec;
    arch = &architecture(c.shape.model_type);
  }
  ModelConfig r = apply_config_overrides(*arch, c, o, config_overrides);
  r.folder = c.folder;
  r.config_path = c.config_path;
  return r;
}

ModelConfig with_task(const ModelConfig& cfg, ModelTask task, int64_t num_labels) {
  const Architecture& a = architecture(cfg.shape.model_type);
  if (a.set_task == nullptr) {
    SNUG_CHECK(task == cfg.task && num_labels <= 0, "--task ", task_name(task),
               num_labels > 0 ? " --num-labels" : "", ": model '", cfg.shape.name, "' (",
               cfg.shape.model_type, ") has only the ", task_name(cfg.task), " head");
    return cfg;
  }
  SNUG_CHECK(num_labels <= 0 || task == ModelTask::sequence_classification,
             "--num-labels: needs --task sequence-classification");
  std::string tasks;
  bool ok = false;
  for (ModelTask t : a.tasks) {
    ok = ok || t == task;
    tasks += std::string(tasks.empty() ? "" : ", ") + task_name(t);
  }
  SNUG_CHECK(ok, "--task ", task_name(task), ": model '", cfg.shape.name, "' (",
             cfg.shape.model_type, ") has no such head (its tasks: ", tasks, ")");
  // Where the config came from is not the family's to decide: without these, `--model DIR --task
  // ...` lost DIR and its run started from the seed instead of the folder's weights.
  ModelConfig r = a.set_task(cfg, task, num_labels);
  r.folder = cfg.folder;
  r.config_path = cfg.config_path;
  return r;
}

std::unique_ptr<Model> create_model(const ModelConfig& cfg, Device& dev, DType param_dtype,
                                    const std::optional<WeightQuantConfig>& quant) {
  const Architecture& a = architecture(cfg.shape.model_type);
  bool ok = false;
  std::string tasks;
  for (ModelTask t : a.tasks) {
    ok = ok || t == cfg.task;
    tasks += std::string(tasks.empty() ? "" : ", ") + task_name(t);
  }
  SNUG_CHECK(ok, "--task ", task_name(cfg.task), ": model '", cfg.shape.name, "' (",
             cfg.shape.model_type, ") has no such head (its tasks: ", tasks, ")");
  return a.create(cfg, dev, param_dtype, quant);
}

HfLoadReport load_model_weights(Model& model, const std::string& path, uint64_t init_seed) {
  const Architecture& a = architecture(model.summary().model_type);
  HfWeightRules rules = a.weight_rules ? a.weight_rules(model) : HfWeightRules{};
  if (rules.model_desc.empty())
    rules.model_desc = model.summary().name + " (" + model.summary().model_type + ")";
  rules.init_seed = init_seed;
  return load_hf_weights(model, path, rules);
}

void save_model_weights(const Model& model, const std::string& path,
                        const std::map<std::string, std::string>& extra) {
  save_hf_weights(model, path, extra);
}

}  // namespace snug

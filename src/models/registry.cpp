#include "models/registry.h"

#include <filesystem>

#include "core/error.h"
#include "io/json_input.h"
#include "models/config_override.h"

namespace snug {

// Each family defines its entry in its own folder.
const Architecture& gpt2_architecture();

const std::vector<const Architecture*>& architectures() {
  static const std::vector<const Architecture*> all = {&gpt2_architecture()};
  return all;
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
  throw Error(detail::concat(where, where.empty() ? "" : ": ", "model_type '", model_type,
                             "' is not supported yet (supported: ", supported_types(), ")"));
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> v;
  for (const Architecture* a : architectures())
    for (const auto& [name, alias] : a->presets) v.push_back(name);
  return v;
}

ModelConfig parse_model_config(std::string_view text, const std::string& spec) {
  const nlohmann::json j = parse_json_input(text, spec);
  SNUG_CHECK(j.is_object(), spec, ": a config.json must be a JSON object");
  std::string type = "gpt2";  // older GPT-2 config.json files carry no model_type
  if (j.contains("model_type")) {
    SNUG_CHECK(j["model_type"].is_string(), spec, ": key 'model_type' must be a string");
    type = j["model_type"].get<std::string>();
  }
  return architecture(type, spec).parse(j, spec, spec);
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
    if (!std::filesystem::exists(spec)) {
      std::string names;
      for (const std::string& n : model_preset_names())
        names += std::string(names.empty() ? "" : ", ") + n;
      throw Error("unknown model '" + spec + "': not a preset (" + names +
                  ") and no such config.json file");
    }
    // A model folder (config.json, tokenizer.json, weights) is read through its config.json.
    std::error_code ec;
    const std::string file = std::filesystem::is_directory(spec, ec)
                                 ? (std::filesystem::path(spec) / "config.json").string()
                                 : spec;
    SNUG_CHECK(file == spec || std::filesystem::exists(file, ec), "model folder ", spec,
               " has no config.json");
    c = parse_model_config(read_input_file(file, file, int64_t{1} << 24), file);
    arch = &architecture(c.shape.model_type);
  }
  return apply_config_overrides(*arch, c, o, config_overrides);
}

std::unique_ptr<CausalLM> create_model(const ModelConfig& cfg, Device& dev, DType param_dtype,
                                       const std::optional<WeightQuantConfig>& quant) {
  return architecture(cfg.shape.model_type).create(cfg, dev, param_dtype, quant);
}

void load_model_weights(CausalLM& model, const std::string& path) {
  architecture(model.summary().model_type).load_weights(model, path);
}

void save_model_weights(const CausalLM& model, const std::string& path,
                        const std::map<std::string, std::string>& extra) {
  architecture(model.summary().model_type).save_weights(model, path, extra);
}

}  // namespace snug

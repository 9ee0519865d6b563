#include "models/registry.h"

#include <filesystem>

#include "core/error.h"
#include "io/json_input.h"

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

// Each dimension fits an int32 index.
constexpr int64_t kMaxDim = (int64_t{1} << 31) - 1;

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

ModelConfig resolve_model(const std::string& spec, const ModelShapeOverrides& o) {
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
    c = parse_model_config(read_input_file(spec, spec, int64_t{1} << 24), spec);
    arch = &architecture(c.shape.model_type);
  }
  if (!o.any()) return c;
  nlohmann::json j = c.hf;
  std::string name = c.shape.name;
  auto apply = [&](const std::optional<int64_t>& v, const char* key, const char* flag,
                   const char* generic) {
    if (!v) return;
    SNUG_CHECK(*v > 0, flag, " must be positive, got ", *v);
    SNUG_CHECK(*v <= kMaxDim, flag, " ", *v, " is out of range (at most ", kMaxDim, ")");
    j[key] = *v;
    name += detail::concat(" ", generic, "=", *v);
  };
  apply(o.n_layer, arch->key_n_layer, "--n-layer", "n_layer");
  apply(o.n_embd, arch->key_n_embd, "--n-embd", "n_embd");
  apply(o.n_head, arch->key_n_head, "--n-head", "n_head");
  apply(o.vocab_size, arch->key_vocab_size, "--vocab-size", "vocab_size");
  apply(o.n_positions, arch->key_n_positions, "--n-positions", "n_positions");
  const int64_t embd = j[arch->key_n_embd].get<int64_t>(),
                heads = j[arch->key_n_head].get<int64_t>();
  SNUG_CHECK(embd % heads == 0, "--n-embd ", embd, " is not divisible by --n-head ", heads,
             " (model '", name, "')");
  return arch->parse(j, name, name);
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

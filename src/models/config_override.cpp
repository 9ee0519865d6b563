#include "models/config_override.h"

#include <optional>

#include "core/error.h"
#include "io/excerpt.h"
#include "io/json_input.h"
#include "models/config_reader.h"
#include "models/registry.h"

namespace snug {

namespace {

// Each dimension a shape flag sets fits an int32 index.

struct Override {
  std::string key;  // the family's config.json key
  nlohmann::json value;
  std::string label;   // added to the model's name: "n_layer=32"
  std::string origin;  // the flag that set it, for messages: "--n-layer", "--config-override x=1"
};

// "KEY=VALUE" as an Override.
Override parse_override(const std::string& text) {
  const std::string origin = "--config-override " + excerpt(text);  // in every message
  const size_t eq = text.find('=');
  SNUG_CHECK(eq != std::string::npos && eq > 0, origin, ": expected KEY=VALUE (a config.json key ",
             "of the model, e.g. n_layer=4)");
  Override o;
  o.key = text.substr(0, eq);
  const std::string value = text.substr(eq + 1);
  try {
    o.value = parse_json_input(value, origin);
  } catch (const Error&) {
    // Text that is not JSON is a string; text that starts like a JSON string, array or object
    // but does not parse is a mistake to report.
    if (!value.empty() && (value[0] == '"' || value[0] == '[' || value[0] == '{')) throw;
    o.value = value;
  }
  o.label = excerpt(o.key + "=" + o.value.dump());  // in the model's name
  o.origin = origin;
  return o;
}

}  // namespace

ModelConfig apply_config_overrides(const Architecture& arch, const ModelConfig& cfg,
                                   const ModelShapeOverrides& shape,
                                   const std::vector<std::string>& overrides) {
  if (!shape.any() && overrides.empty()) return cfg;
  std::vector<Override> all;
  auto alias = [&](const std::optional<int64_t>& v, const char* key, const char* flag,
                   const char* generic) {
    if (!v) return;
    SNUG_CHECK(*v > 0, flag, " must be positive, got ", *v);
    SNUG_CHECK(*v <= kMaxConfigDim, flag, " ", *v, " is out of range (at most ", kMaxConfigDim,
               ")");
    all.push_back({key, *v, detail::concat(generic, "=", *v), flag});
  };
  alias(shape.n_layer, arch.keys.n_layer, "--n-layer", "n_layer");
  alias(shape.n_embd, arch.keys.n_embd, "--n-embd", "n_embd");
  alias(shape.n_head, arch.keys.n_head, "--n-head", "n_head");
  alias(shape.vocab_size, arch.keys.vocab_size, "--vocab-size", "vocab_size");
  alias(shape.n_positions, arch.keys.n_positions, "--n-positions", "n_positions");
  for (const std::string& text : overrides) all.push_back(parse_override(text));

  nlohmann::json j = cfg.hf;
  std::string name = cfg.shape.name;
  std::string generic;  // the --config-override flags, for messages from the family's parse
  for (size_t i = 0; i < all.size(); ++i) {
    const Override& o = all[i];
    SNUG_CHECK(o.key != "model_type", o.origin,
               ": model_type picks the family and cannot be overridden (give --model a "
               "config.json of the other family)");
    if (!cfg.hf.contains(o.key)) {
      std::string keys;
      for (const auto& [k, v] : cfg.hf.items())
        if (k != "model_type") keys += (keys.empty() ? "" : ", ") + k;
      throw Error(detail::concat(o.origin, ": model '", cfg.shape.name, "' (", cfg.shape.model_type,
                                 ") has no config.json key '", excerpt(o.key),
                                 "' (its keys: ", keys, ")"));
    }
    for (size_t k = 0; k < i; ++k)
      SNUG_CHECK(all[k].key != o.key, o.origin, ": config.json key '", excerpt(o.key),
                 "' is already set by ", all[k].origin);
    j[o.key] = o.value;
    name += " " + o.label;
    if (o.origin.rfind("--config-override", 0) == 0)
      generic += (generic.empty() ? "" : ", ") + o.origin;
  }
  const nlohmann::json &je = j[arch.keys.n_embd], &jh = j[arch.keys.n_head];
  if (shape.any() && je.is_number_integer() && jh.is_number_integer() && jh.get<int64_t>() > 0) {
    // The shape flags' own message, naming both flags.
    const int64_t embd = je.get<int64_t>(), heads = jh.get<int64_t>();
    SNUG_CHECK(embd % heads == 0, "--n-embd ", embd, " is not divisible by --n-head ", heads,
               " (model '", name, "')");
  }
  if (generic.empty()) return arch.parse(j, name, name);
  try {
    return arch.parse(j, name, name);
  } catch (const Error& e) {
    throw Error(generic + ": " + e.what());
  }
}

}  // namespace snug

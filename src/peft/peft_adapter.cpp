#include "peft/peft_adapter.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "io/excerpt.h"
#include "io/finite.h"
#include "io/json_input.h"
#include "io/safetensors.h"
#include "train/flag_table.h"
#include "train/model_setup.h"
#include "train/number_range.h"

namespace snug {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kMaxConfigBytes = int64_t{1} << 20;

// Keys of PEFT's LoraConfig whose non-default value changes what the adapted model computes in
// ways snug does not implement; each must be absent, null, false or empty.
struct Unsupported {
  const char* key;
  const char* what;
};
constexpr Unsupported kUnsupported[] = {
    {"modules_to_save", "fully trained copies of other modules"},
    {"use_dora", "DoRA (weight-decomposed LoRA)"},
    {"lora_bias", "a bias on lora_B"},
    {"rank_pattern", "per-module ranks"},
    {"alpha_pattern", "per-module alphas"},
    {"layers_to_transform", "adapters on some layers only"},
    {"exclude_modules", "excluded modules"},
    {"target_parameters", "adapters on parameters rather than modules"},
    {"layer_replication", "replicated layers"},
    {"trainable_token_indices", "trainable token embeddings"},
    {"use_qalora", "QA-LoRA"},
    {"alora_invocation_tokens", "activated LoRA"},
};

bool neutral(const nlohmann::json& v) {
  return v.is_null() || (v.is_boolean() && !v.get<bool>()) ||
         ((v.is_array() || v.is_object() || v.is_string()) && v.empty());
}

std::string comma_joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// The adapter's target_modules for a message: the file's list can be nearly a megabyte.
std::string targets_shown(const std::vector<std::string>& v) {
  return excerpt(comma_joined(v));
}

}  // namespace

PeftAdapterConfig read_peft_adapter_config(const std::string& dir) {
  std::error_code ec;
  SNUG_CHECK(fs::is_directory(dir, ec), "--adapter ", dir,
             ": no such directory (a PEFT adapter folder: ", kPeftConfigFile, " and ",
             kPeftWeightsFile, ", as `snug export --adapter` writes)");
  PeftAdapterConfig a;
  a.dir = dir;
  a.config_path = (fs::path(dir) / kPeftConfigFile).string();
  const fs::path weights = fs::path(dir) / kPeftWeightsFile;
  SNUG_CHECK(fs::exists(a.config_path, ec), "--adapter ", dir, ": no ", kPeftConfigFile,
             " (a PEFT adapter folder has ", kPeftConfigFile, " and ", kPeftWeightsFile, ")");
  SNUG_CHECK(fs::exists(weights, ec) || !fs::exists(fs::path(dir) / "adapter_model.bin", ec),
             "--adapter ", dir, ": only ", kPeftWeightsFile,
             " is read; adapter_model.bin is a pickle (save the adapter with "
             "safe_serialization=True)");
  SNUG_CHECK(fs::exists(weights, ec), "--adapter ", dir, ": no ", kPeftWeightsFile,
             " (a PEFT adapter folder has ", kPeftConfigFile, " and ", kPeftWeightsFile, ")");
  const std::string& where = a.config_path;
  const nlohmann::json j = parse_json_input(read_input_file(where, where, kMaxConfigBytes), where);
  SNUG_CHECK(j.is_object(), where, ": not a JSON object");
  auto get = [&](const char* key) { return j.contains(key) ? j[key] : nlohmann::json(); };

  const nlohmann::json type = get("peft_type");
  SNUG_CHECK(type.is_null() || type == "LORA", where, ": peft_type ", excerpt(type.dump()),
             ": only LoRA adapters are read (\"LORA\")");
  const nlohmann::json task = get("task_type");
  SNUG_CHECK(task.is_null() || task == "CAUSAL_LM", where, ": task_type ", excerpt(task.dump()),
             ": snug generate reads causal LM adapters (\"CAUSAL_LM\")");
  const nlohmann::json bias = get("bias");
  SNUG_CHECK(bias.is_null() || bias == "none", where, ": bias ", excerpt(bias.dump()),
             ": only \"none\" is supported (the adapter would train the base's biases)");
  for (const Unsupported& u : kUnsupported)
    SNUG_CHECK(neutral(get(u.key)), where, ": ", u.key, " ", excerpt(get(u.key).dump()), ": ",
               u.what, " is not supported");

  const nlohmann::json r = get("r");
  SNUG_CHECK(r.is_number_integer() && r.get<int64_t>() > 0, where, ": r ", excerpt(r.dump()),
             ": the rank must be a positive integer");
  a.r = r.get<int64_t>();
  // The ranges of --lora-r and --lora-alpha (train/flag_table.cpp): lora_alpha 1e38 made the
  // scale inf and generation emit one token.
  const NumberRange& r_range = *flag_for_key("lora_r").range;
  SNUG_CHECK(in_range(NumberValue{.i = a.r}, r_range), where, ": r ", a.r,
             " is out of range: the rank is ", r_range.describe());
  const nlohmann::json alpha = get("lora_alpha");
  SNUG_CHECK(alpha.is_number(), where, ": lora_alpha ", excerpt(alpha.dump()),
             ": must be a number");
  a.alpha = alpha.get<double>();
  const NumberRange& alpha_range = *flag_for_key("lora_alpha").range;
  SNUG_CHECK(in_range(NumberValue{.d = a.alpha}, alpha_range), where, ": lora_alpha ",
             format_number(a.alpha), " is out of range: lora_alpha is ", alpha_range.describe());
  const nlohmann::json rs = get("use_rslora");
  SNUG_CHECK(rs.is_null() || rs.is_boolean(), where, ": use_rslora ", excerpt(rs.dump()),
             ": must be true or false");
  a.use_rslora = rs.is_boolean() && rs.get<bool>();
  const nlohmann::json fifo = get("fan_in_fan_out");
  SNUG_CHECK(fifo.is_null() || fifo.is_boolean(), where, ": fan_in_fan_out ", excerpt(fifo.dump()),
             ": must be true or false");
  const nlohmann::json targets = get("target_modules");
  SNUG_CHECK(!targets.is_string(), where, ": target_modules ", excerpt(targets.dump()),
             ": a regular expression is not supported; give the module names as a list");
  SNUG_CHECK(targets.is_array() && !targets.empty(), where, ": target_modules ",
             excerpt(targets.dump()), ": must be a non-empty list of module names");
  for (const nlohmann::json& t : targets) {
    SNUG_CHECK(t.is_string() && !t.get<std::string>().empty() &&
                   t.get<std::string>().find(',') == std::string::npos,
               where, ": target_modules entry ", excerpt(t.dump()), ": must be a module name");
    a.target_modules.push_back(t.get<std::string>());
  }
  return a;
}

void adopt_peft_adapter(TrainingArguments& args, const PeftAdapterConfig& a,
                        const std::function<bool(const std::string& flag)>& given) {
  auto conflict = [&](const char* key, bool differs, const std::string& mine,
                      const std::string& theirs) {
    const std::string flag = flag_for_key(key).name();
    SNUG_CHECK(!given(flag) || !differs, flag, " ", mine, " conflicts with --adapter ", a.dir, " (",
               a.config_path, ": ", theirs,
               "); leave the flag out: the adapter's LoRA settings are used");
  };
  conflict("lora_r", args.lora_r != a.r, std::to_string(args.lora_r), "r " + std::to_string(a.r));
  conflict("lora_alpha", args.lora_alpha != a.alpha, format_number(args.lora_alpha),
           "lora_alpha " + format_number(a.alpha));
  conflict("use_rslora", args.use_rslora != a.use_rslora, args.use_rslora ? "true" : "false",
           std::string("use_rslora ") + (a.use_rslora ? "true" : "false"));
  {
    // As sets: PEFT stores target_modules as a set.
    std::vector<std::string> mine = args.target_modules.empty()
                                        ? std::vector<std::string>{}
                                        : parse_target_modules(args.target_modules);
    std::vector<std::string> theirs = a.target_modules;
    std::sort(mine.begin(), mine.end());
    std::sort(theirs.begin(), theirs.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    theirs.erase(std::unique(theirs.begin(), theirs.end()), theirs.end());
    conflict("target_modules", mine != theirs, excerpt(shell_word(args.target_modules)),
             "target_modules " + targets_shown(a.target_modules));
  }
  args.lora_r = a.r;
  args.lora_alpha = a.alpha;
  args.use_rslora = a.use_rslora;
  args.target_modules = comma_joined(a.target_modules);
}

std::string load_peft_adapter(Model& model, const TrainingArguments& args,
                              const PeftAdapterConfig& a) {
  SNUG_ASSERT(args.lora_r == a.r && args.target_modules == comma_joined(a.target_modules),
              "load_peft_adapter: adopt_peft_adapter first");
  try {
    prepare_model(model, args);
  } catch (const Error& e) {
    // add_lora names the flag; here the targets come from the adapter's config.
    const std::string msg = e.what();
    const std::string flag = "--target-modules: ";
    if (msg.rfind(flag, 0) != 0) throw;
    throw Error(detail::concat(a.config_path, ": target_modules ", msg.substr(flag.size())));
  }
  const std::string path = (fs::path(a.dir) / kPeftWeightsFile).string();
  const SafetensorsFile f(path);
  const std::string name_of_model = model.summary().name;
  std::set<const Parameter*> adapters, loaded;
  for (const LoraAdapter& ad : model.lora_adapters()) adapters.insert({ad.A, ad.B});
  for (const std::string& name : f.names()) {
    const bool prefixed = name.rfind(kPeftPrefix, 0) == 0;
    Parameter* p = prefixed ? model.find(name.substr(std::string(kPeftPrefix).size())) : nullptr;
    SNUG_CHECK(p != nullptr && adapters.count(p) != 0, path, ": tensor '", excerpt(name),
               "' is not a LoRA weight of ", name_of_model, " with target_modules ",
               targets_shown(a.target_modules), " (PEFT's names: ", kPeftPrefix,
               "<module>.lora_A.weight and .lora_B.weight)");
    const SafetensorsFile::Info& inf = f.info(name);
    SNUG_CHECK(inf.dtype == "F32" || inf.dtype == "F16" || inf.dtype == "BF16", path, ": tensor '",
               name, "' is ", inf.dtype, "; adapters must be F32, F16 or BF16");
    SNUG_CHECK(inf.shape == p->value.shape(), path, ": tensor '", name, "' has shape ",
               shape_str(inf.shape), ", ", name_of_model, " with r ", a.r, " (", a.config_path,
               ") needs ", shape_str(p->value.shape()));
    f.read_into(name, p->value);
    if (const std::optional<NonFinite> bad = first_non_finite(p->value))
      throw Error(detail::concat(path, ": tensor '", name, "' holds ", bad->nan ? "nan" : "inf",
                                 " at element ", bad->index,
                                 "; an adapter's weights must be finite"));
    loaded.insert(p);
  }
  for (const LoraAdapter& ad : model.lora_adapters())
    for (const Parameter* p : {ad.A, ad.B})
      SNUG_CHECK(loaded.count(p) != 0, path, ": no tensor '", kPeftPrefix, p->name,
                 "': target_modules ", targets_shown(a.target_modules), " (", a.config_path,
                 ") adapt ", ad.module, " of ", name_of_model);
  return detail::concat("the adapter ", a.dir, " (", model.lora_adapters().size(),
                        " LoRA modules, r=", a.r, ")");
}

}  // namespace snug

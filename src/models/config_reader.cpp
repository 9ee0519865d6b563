#include "models/config_reader.h"

#include <array>
#include <cmath>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "io/excerpt.h"

namespace snug {

ConfigKeys::ConfigKeys(const nlohmann::json& j, std::string spec, bool null_is_missing)
    : j_(j), spec_(std::move(spec)), null_is_missing_(null_is_missing) {
  SNUG_CHECK(j_.is_object(), spec_, ": a config.json must be a JSON object");
}

bool ConfigKeys::has(const char* key) const {
  return j_.contains(key) && !(null_is_missing_ && j_[key].is_null());
}

void ConfigKeys::integer(const char* key, int64_t& out, bool required) const {
  if (!has(key)) {
    SNUG_CHECK(!required, spec_, ": missing key '", key, "'");
    return;
  }
  SNUG_CHECK(j_[key].is_number_integer(), spec_, ": key '", key, "' must be an integer");
  out = j_[key].get<int64_t>();
}

void ConfigKeys::number(const char* key, double& out) const {
  if (!has(key)) return;
  SNUG_CHECK(j_[key].is_number(), spec_, ": key '", key, "' must be a number");
  out = j_[key].get<double>();
}

std::string ConfigKeys::string(const char* key, const char* def) const {
  if (!has(key)) return def;
  SNUG_CHECK(j_[key].is_string(), spec_, ": key '", key, "' must be a string");
  return j_[key].get<std::string>();
}

bool is_harmless_config_key(const std::string& key) {
  static constexpr std::array<std::string_view, 63> kKeys = {
      // identity and bookkeeping
      "model_type", "architectures", "_name_or_path", "name_or_path", "transformers_version",
      "torch_dtype", "dtype", "auto_map", "_commit_hash", "_attn_implementation_autoset",
      "model_name", "torchscript", "use_bfloat16", "tf_legacy_loss", "return_dict",
      "output_attentions", "output_hidden_states", "chunk_size_feed_forward", "pruned_heads",
      "is_encoder_decoder", "is_decoder", "add_cross_attention", "tie_encoder_decoder",
      "cross_attention_hidden_size", "finetuning_task", "tokenizer_class", "prefix",
      "task_specific_params", "use_cache",
      // token ids
      "bos_token_id", "eos_token_id", "pad_token_id", "sep_token_id", "decoder_start_token_id",
      // classification heads' labels (not a causal LM's)
      "id2label", "label2id", "num_labels", "problem_type",
      // generation defaults older transformers wrote into every config.json
      "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
      "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
      "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
      "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
      "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
      "suppress_tokens", "begin_suppress_tokens"};
  for (std::string_view k : kKeys)
    if (key == k) return true;
  return false;
}

ConfigReader::ConfigReader(const nlohmann::json& j, std::string spec, std::string family)
    : j_(j), spec_(std::move(spec)), family_(std::move(family)) {
  SNUG_CHECK(j_.is_object(), spec_, ": a config.json must be a JSON object");
}

void ConfigReader::fail(const std::string& key, const std::string& what) const {
  throw Error(detail::concat(spec_, ": config.json key '", excerpt(key), "' ", what));
}

void ConfigReader::dimension(const std::string& key, int64_t v) const {
  if (v <= 0 || v > kMaxConfigDim)
    fail(key, detail::concat(v, " must be positive (and at most ", kMaxConfigDim, ")"));
}

void ConfigReader::dimensions(std::initializer_list<std::pair<const char*, int64_t>> dims) const {
  for (const auto& [key, v] : dims) dimension(key, v);
}

void ConfigReader::param_count(long double params) const {
  if (params > 0x1p58L)
    throw Error(detail::concat(spec_, ": about ", static_cast<double>(params),
                               " parameters, out of range (at most 2^58)"));
}

bool ConfigReader::has(const std::string& key) const {
  return j_.contains(key) && !j_[key].is_null();
}

const nlohmann::json* ConfigReader::get(const std::string& key) {
  used_.insert(key);
  if (!j_.contains(key) || j_[key].is_null()) return nullptr;
  return &j_[key];
}

int64_t ConfigReader::integer(const std::string& key, int64_t def) {
  const nlohmann::json* v = get(key);
  int64_t r = def;
  if (v != nullptr) {
    if (v->is_number_integer()) {
      r = v->get<int64_t>();
    } else if (v->is_number_float() && std::isfinite(v->get<double>()) &&
               std::trunc(v->get<double>()) == v->get<double>() &&
               std::fabs(v->get<double>()) < 0x1p62) {
      r = static_cast<int64_t>(v->get<double>());
    } else {
      fail(key, "must be an integer, got " + excerpt(v->dump()));
    }
  }
  out_[key] = r;
  return r;
}

std::optional<int64_t> ConfigReader::optional_integer(const std::string& key) {
  if (!has(key)) {
    used_.insert(key);
    out_[key] = nullptr;
    return std::nullopt;
  }
  return integer(key, 0);
}

double ConfigReader::number(const std::string& key, double def) {
  const nlohmann::json* v = get(key);
  double r = def;
  if (v != nullptr) {
    if (!v->is_number()) fail(key, "must be a number, got " + excerpt(v->dump()));
    r = v->get<double>();
    if (!std::isfinite(r)) fail(key, "must be finite");
  }
  out_[key] = r;
  return r;
}

bool ConfigReader::boolean(const std::string& key, bool def) {
  const nlohmann::json* v = get(key);
  bool r = def;
  if (v != nullptr) {
    if (!v->is_boolean()) fail(key, "must be true or false, got " + excerpt(v->dump()));
    r = v->get<bool>();
  }
  out_[key] = r;
  return r;
}

std::string ConfigReader::string(const std::string& key, const std::string& def) {
  const nlohmann::json* v = get(key);
  std::string r = def;
  if (v != nullptr) {
    if (!v->is_string()) fail(key, "must be a string, got " + excerpt(v->dump()));
    r = v->get<std::string>();
  }
  out_[key] = r;
  return r;
}

const nlohmann::json* ConfigReader::raw(const std::string& key, const nlohmann::json& def) {
  const nlohmann::json* v = get(key);
  out_[key] = v != nullptr ? *v : def;
  return v;
}

void ConfigReader::zero_dropout(const std::string& key) {
  const double p = number(key, 0.0);
  if (p != 0.0)
    fail(key, detail::concat("is ", p, ": dropout is not implemented for ", family_,
                             " yet (set it to 0.0 to train without it)"));
}

void ConfigReader::accept(const std::string& key) {
  used_.insert(key);
  if (j_.contains(key)) out_[key] = j_[key];
}

void ConfigReader::finish() {
  for (const auto& [key, value] : j_.items()) {
    if (used_.count(key) != 0) continue;
    if (is_harmless_config_key(key)) {
      out_[key] = value;
      continue;
    }
    fail(key, detail::concat("is not supported for ", family_,
                             " (snug does not know what it changes, so it refuses it rather than "
                             "ignore it)"));
  }
}

}  // namespace snug

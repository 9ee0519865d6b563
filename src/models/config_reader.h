// Reading a Hugging Face config.json strictly, for a family's parse (models/registry.h): every
// key is either read (typed, with the transformers class default when it is missing), accepted
// as harmless (token ids, dtype, versions, generation and bookkeeping keys of PretrainedConfig,
// which change nothing snug computes), or refused by name. A key that would change the model
// and that snug does not implement is never silently ignored: finish() refuses every key that
// was neither read nor accepted, naming the file and the key.
//
// The reader also builds the resolved config.json (resolved()): the input's keys with the
// defaults filled in, which is what `--config-override` edits and the family re-parses. A key
// whose default is derived from others (num_key_value_heads = num_attention_heads) stays null
// when missing, so that a shape flag changing the others keeps the derivation, as in
// transformers.
//
// Every message starts with `spec` (the file or preset) and names the key.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace snug {

// The largest dimension a config may give (a hidden size, a layer count, a vocabulary): int32's.
inline constexpr int64_t kMaxConfigDim = (int64_t{1} << 31) - 1;

class ConfigReader {
 public:
  // `family`: the model_type, for messages.
  ConfigReader(const nlohmann::json& j, std::string spec, std::string family);

  // An integer (a JSON integer, or a float with an integral value as some writers emit).
  int64_t integer(const std::string& key, int64_t def);
  // null or missing: nullopt (the key resolves to null).
  std::optional<int64_t> optional_integer(const std::string& key);
  double number(const std::string& key, double def);
  bool boolean(const std::string& key, bool def);
  std::string string(const std::string& key, const std::string& def);
  // The raw value (nullptr when missing), marked read; the caller validates it and names the key
  // through fail(). `def` is what resolved() holds when the key is missing.
  const nlohmann::json* raw(const std::string& key, const nlohmann::json& def = nullptr);
  // Dropout probabilities: snug has no dropout for this family yet, so anything but 0 is refused.
  void zero_dropout(const std::string& key);
  bool has(const std::string& key) const;
  // Accepts `key` as harmless (copied to resolved() as given, when present).
  void accept(const std::string& key);

  // Throws "<spec>: config.json key '<key>' <what>", the key as an excerpt (io/excerpt.h): a key
  // or value quoted from the file is at most a short excerpt, so that `what` quotes values
  // through excerpt() too.
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  // The checks every family's shape gets: a dimension `v` read from `key` is in [1, 2^31 - 1]
  // (it indexes as an int32); the exact parameter count `params` is at most 2^58 (its bytes of
  // weights, gradients and state fit an int64).
  void dimension(const std::string& key, int64_t v) const;
  // dimension() of each (key, value), in order.
  void dimensions(std::initializer_list<std::pair<const char*, int64_t>> dims) const;
  void param_count(long double params) const;
  // Refuses every key neither read nor accepted; harmless PretrainedConfig keys are accepted.
  void finish();
  // The config.json as resolved: what was given, with every read key's default filled in.
  const nlohmann::json& resolved() const { return out_; }
  const std::string& spec() const { return spec_; }

 private:
  const nlohmann::json* get(const std::string& key);

  const nlohmann::json& j_;
  std::string spec_, family_;
  std::set<std::string> used_;
  nlohmann::json out_ = nlohmann::json::object();
};

// Reading typed keys of a config.json one at a time, for the families whose parse ignores the
// keys it does not know, as transformers does (GPT-2, BERT): the same types and messages as
// ConfigReader's siblings, "<spec>: missing key '<key>'", "<spec>: key '<key>' must be an
// integer" (a number, a string). With `null_is_missing` a null value is read as missing.
class ConfigKeys {
 public:
  ConfigKeys(const nlohmann::json& j, std::string spec, bool null_is_missing);

  // Sets `out` when the key is there; a missing `required` key throws.
  void integer(const char* key, int64_t& out, bool required) const;
  void number(const char* key, double& out) const;
  // The key's string, or `def` when missing.
  std::string string(const char* key, const char* def) const;
  bool has(const char* key) const;

 private:
  const nlohmann::json& j_;
  std::string spec_;
  bool null_is_missing_;
};

// PretrainedConfig keys that change nothing snug computes for a causal LM (token ids, dtypes,
// versions, generation defaults, labels of classification heads, bookkeeping).
bool is_harmless_config_key(const std::string& key);

}  // namespace snug

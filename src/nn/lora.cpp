#include "nn/lora.h"

#include <cmath>

#include "core/error.h"
#include "core/random.h"
#include "io/excerpt.h"

namespace snug {

double LoraConfig::scaling() const {
  const double rr = static_cast<double>(r);
  return use_rslora ? alpha / std::sqrt(rr) : alpha / rr;
}

void LoraConfig::validate() const {
  SNUG_CHECK(r > 0, "--lora-r must be a positive rank, got ", r);
  SNUG_CHECK(std::isfinite(alpha) && alpha > 0, "--lora-alpha must be positive, got ", alpha);
  SNUG_CHECK(dropout >= 0 && dropout < 1, "--lora-dropout must be in [0, 1), got ", dropout);
  SNUG_CHECK(!target_modules.empty(), "--target-modules: give at least one module name");
  for (const std::string& k : target_modules)
    SNUG_CHECK(!k.empty(), "--target-modules: empty module name");
}

std::vector<std::string> parse_target_modules(const std::string& text) {
  std::vector<std::string> keys;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string key =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t b = key.find_first_not_of(' '), e = key.find_last_not_of(' ');
    key = b == std::string::npos ? std::string() : key.substr(b, e - b + 1);
    SNUG_CHECK(!key.empty(), "--target-modules '", excerpt(text),
               "': empty module name in the list");
    keys.push_back(key);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return keys;
}

bool lora_target_matches(const std::vector<std::string>& keys, const std::string& module_name) {
  for (const std::string& k : keys) {
    if (k == "all-linear" || k == module_name) return true;
    if (module_name.size() > k.size() &&
        module_name.compare(module_name.size() - k.size(), k.size(), k) == 0 &&
        module_name[module_name.size() - k.size() - 1] == '.')
      return true;
  }
  return false;
}

uint64_t lora_dropout_key(uint64_t seed, uint64_t forward_count, int64_t layer, int slot) {
  uint64_t k = splitmix64_mix(seed ^ 0x6c6f72615f64726full);  // "lora_dro"
  k = splitmix64_mix(k + forward_count);
  k = splitmix64_mix(k + static_cast<uint64_t>(layer));
  return splitmix64_mix(k + static_cast<uint64_t>(slot));
}

}  // namespace snug

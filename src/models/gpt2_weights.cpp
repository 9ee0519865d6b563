#include "models/gpt2_weights.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <sstream>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/safetensors.h"

namespace snug {

namespace {

constexpr const char* kPrefix = "transformer.";
constexpr const char* kLmHead = "lm_head.weight";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The causal-mask buffers older transformers versions saved with GPT-2 (not parameters).
bool is_mask_buffer(const std::string& name) {
  return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias");
}

std::string float_str(float v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

}  // namespace

std::map<std::string, std::string> gpt2_weights_metadata(const GPT2Config& cfg) {
  return {{"format", "pt"},
          {"model", cfg.name},
          {"vocab_size", std::to_string(cfg.vocab_size)},
          {"n_positions", std::to_string(cfg.n_positions)},
          {"n_embd", std::to_string(cfg.n_embd)},
          {"n_layer", std::to_string(cfg.n_layer)},
          {"n_head", std::to_string(cfg.n_head)},
          {"layer_norm_epsilon", float_str(cfg.layer_norm_epsilon)}};
}

void save_gpt2_weights(const GPT2& model, const std::string& path,
                       const std::map<std::string, std::string>& extra) {
  // (A meta model has no values: save_safetensors refuses its tensors, naming them.)
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  // Quantized weights are written dequantized (fp32), staged outside the model's pool.
  Device staging(DeviceKind::cpu);
  std::vector<Tensor> dequantized;
  dequantized.reserve(model.parameters().size());
  for (const Parameter* p : model.parameters()) {
    if (p->quantized()) {
      dequantized.push_back(Tensor::empty(p->shape(), DType::f32, Category::weights, staging));
      model.read_values(*p, dequantized.back().data<float>());
      tensors.emplace_back(p->name, &dequantized.back());
    } else {
      tensors.emplace_back(p->name, &p->value);
    }
  }
  std::map<std::string, std::string> meta = gpt2_weights_metadata(model.config());
  for (const auto& [k, v] : extra) meta[k] = v;
  save_safetensors(path, tensors, meta);
}

void load_gpt2_weights(GPT2& model, const std::string& path) {
  const SafetensorsFile f(path);
  // File name -> parameter, for every tensor that is a parameter under either spelling.
  std::vector<std::pair<std::string, Parameter*>> matched;
  std::set<const Parameter*> seen;
  std::vector<std::string> unexpected;
  bool has_lm_head = false;
  for (const std::string& name : f.names()) {
    Parameter* p = model.find(name);
    if (p == nullptr && name.rfind(kPrefix, 0) != 0) p = model.find(kPrefix + name);
    if (p != nullptr) {
      SNUG_CHECK(seen.insert(p).second, path, ": parameter '", p->name,
                 "' appears twice (with and without the 'transformer.' prefix)");
      matched.emplace_back(name, p);
    } else if (name == kLmHead) {
      has_lm_head = true;
    } else if (!is_mask_buffer(name)) {
      unexpected.push_back(name);
    }
  }
  if (!unexpected.empty()) {
    std::string list;
    for (size_t i = 0; i < unexpected.size() && i < 5; ++i)
      list += (i ? ", '" : "'") + unexpected[i] + "'";
    if (unexpected.size() > 5) list += ", ...";
    throw Error(detail::concat(path, ": ", unexpected.size(), " tensor(s) that ",
                               model.config().name, " (GPT-2) does not have: ", list));
  }
  for (const Parameter* p : model.parameters())
    SNUG_CHECK(seen.count(p) != 0, path, ": no tensor '", p->name, "' (needed by ",
               model.config().name, ")");
  for (auto& [name, p] : matched) {
    const SafetensorsFile::Info& inf = f.info(name);
    const Shape& want = p->shape();
    SNUG_CHECK(inf.shape == want, path, ": tensor '", name, "' has shape ", shape_str(inf.shape),
               ", ", model.config().name, " needs ", shape_str(want));
    SNUG_CHECK(inf.dtype == "F32" || inf.dtype == "F16" || inf.dtype == "BF16", path, ": tensor '",
               name, "' is ", inf.dtype, "; weights must be F32, F16 or BF16");
    if (!p->quantized()) {
      f.read_into(name, p->value);
      check_finite(p->value, path, name);
    } else {
      // --load-in-8bit/4bit: read into host staging and quantize (the fp32 tensor never
      // occupies the device, as a bitsandbytes load; a meta weight keeps no codes).
      Device staging(DeviceKind::cpu);
      Tensor host = Tensor::empty(p->shape(), DType::f32, Category::weights, staging);
      f.read_into(name, host);
      check_finite(host, path, name);
      quantize_weight_into(*p->quant, host.data<float>(), p->name);
    }
  }
  if (has_lm_head) {
    // snug ties the LM head to the token embedding, as GPT-2 does; an untied head cannot load.
    const std::string wte =
        f.contains("transformer.wte.weight") ? "transformer.wte.weight" : "wte.weight";
    SNUG_CHECK(f.info(kLmHead).shape == f.info(wte).shape && f.read_f32(kLmHead) == f.read_f32(wte),
               path, ": 'lm_head.weight' differs from '", wte,
               "'; snug ties the LM head to the token embedding (GPT-2's layout)");
  }
}

}  // namespace snug

namespace snug {

ModelSummary GPT2::summary() const {
  ModelSummary s;
  s.name = cfg_.name;
  s.model_type = "gpt2";
  s.n_layer = cfg_.n_layer;
  s.n_embd = cfg_.n_embd;
  s.n_head = cfg_.n_head;
  s.vocab_size = cfg_.vocab_size;
  s.n_positions = cfg_.n_positions;
  return s;
}

std::map<std::string, std::string> GPT2::weights_metadata() const {
  return gpt2_weights_metadata(cfg_);
}

}  // namespace snug

#include "models/named_weights.h"

#include <set>
#include <utility>

#include "core/error.h"
#include "io/safetensors.h"
#include "quant/weight_quant.h"

namespace snug {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

void save_named_weights(const DecoderLM& model, const std::string& path,
                        const std::map<std::string, std::string>& extra) {
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  Device staging(DeviceKind::cpu);  // quantized weights are written dequantized (fp32)
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
  std::map<std::string, std::string> meta = model.weights_metadata();
  for (const auto& [k, v] : extra) meta[k] = v;
  save_safetensors(path, tensors, meta);
}

void load_named_weights(DecoderLM& model, const std::string& path, const NamedWeightsRules& rules) {
  const SafetensorsFile f(path);
  const std::string& name_of_model = model.spec().name;
  std::set<const Parameter*> seen;
  std::vector<std::pair<std::string, Parameter*>> matched;
  bool has_tied_head = false;
  for (const std::string& name : f.names()) {
    if (Parameter* p = model.find(name)) {
      seen.insert(p);
      matched.emplace_back(name, p);
      continue;
    }
    if (model.spec().tie_word_embeddings && name == rules.tied_head) {
      has_tied_head = true;
      continue;
    }
    bool ignored = false;
    for (const std::string& s : rules.ignored) ignored = ignored || ends_with(name, s);
    SNUG_CHECK(ignored, path, ": tensor '", name, "' is not a parameter of ", name_of_model);
  }
  for (const Parameter* p : model.parameters())
    SNUG_CHECK(seen.count(p) != 0, path, ": no tensor '", p->name, "' (needed by ", name_of_model,
               ")");
  for (auto& [name, p] : matched) {
    const SafetensorsFile::Info& inf = f.info(name);
    SNUG_CHECK(inf.shape == p->shape(), path, ": tensor '", name, "' has shape ",
               shape_str(inf.shape), ", ", name_of_model, " needs ", shape_str(p->shape()));
    SNUG_CHECK(inf.dtype == "F32" || inf.dtype == "F16" || inf.dtype == "BF16", path, ": tensor '",
               name, "' is ", inf.dtype, "; weights must be F32, F16 or BF16");
    if (!p->quantized()) {
      f.read_into(name, p->value);
      check_finite(p->value, path, name);
    } else {
      Device staging(DeviceKind::cpu);
      Tensor host = Tensor::empty(p->shape(), DType::f32, Category::weights, staging);
      f.read_into(name, host);
      check_finite(host, path, name);
      quantize_weight_into(*p->quant, host.data<float>(), p->name);
    }
  }
  if (has_tied_head) {
    const std::string& embed = model.spec().embed_name;
    SNUG_CHECK(f.info(rules.tied_head).shape == f.info(embed).shape &&
                   f.read_f32(rules.tied_head) == f.read_f32(embed),
               path, ": '", rules.tied_head, "' differs from '", embed, "', but ", name_of_model,
               " ties its head to the embedding (tie_word_embeddings)");
  }
}

}  // namespace snug

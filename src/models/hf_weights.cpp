#include "models/hf_weights.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/disk_space.h"
#include "io/excerpt.h"
#include "io/json_input.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "nn/param_fill.h"
#include "quant/weight_quant.h"

namespace snug {

namespace {

namespace fs = std::filesystem;

constexpr const char* kIndex = "model.safetensors.index.json";
constexpr const char* kSingle = "model.safetensors";
constexpr size_t kMaxShardName = 255;  // NAME_MAX of Linux file systems

// The index's weight_map (tensor name -> shard file name), validated.
std::map<std::string, std::string> read_index(const fs::path& index) {
  const std::string what = "index '" + index.string() + "'";
  const nlohmann::json j = parse_json_input(read_input_file(index.string(), what), what);
  SNUG_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), what,
             ": no 'weight_map' object");
  std::map<std::string, std::string> map;
  for (const auto& [name, file] : j["weight_map"].items()) {
    SNUG_CHECK(file.is_string(), what, ": weight_map['", excerpt(name), "'] is not a file name");
    const std::string f = file.get<std::string>();
    // A NUL would cut the path short where the file is opened, and the message with it.
    SNUG_CHECK(f.find('\0') == std::string::npos, what, ": weight_map['", excerpt(name),
               "']: the file name holds a NUL byte");
    SNUG_CHECK(!f.empty() && f.find('/') == std::string::npos && f != "." && f != "..", what,
               ": weight_map['", excerpt(name), "'] = '", excerpt(f),
               "' is not a file name in the folder");
    // Longer than a file name can be (NAME_MAX): it cannot name a shard, and every message about
    // the shard would quote its path whole.
    SNUG_CHECK(f.size() <= kMaxShardName, what, ": weight_map['", excerpt(name), "'] = '",
               excerpt(f), "' is longer than a file name can be (", kMaxShardName, " bytes)");
    map.emplace(name, f);
  }
  SNUG_CHECK(!map.empty(), what, ": the weight_map is empty");
  return map;
}

struct WeightFiles {
  std::vector<std::string> files;
  std::map<std::string, std::string> index;  // name -> file path (sharded folders only)
};

WeightFiles weight_files(const std::string& path) {
  WeightFiles w;
  if (!fs::is_directory(path)) {
    w.files.push_back(path);
    return w;
  }
  const fs::path dir(path);
  // Present is any entry by the name (a dangling symlink too): opening it names the problem.
  auto present = [](const fs::path& p) {
    std::error_code ec;
    return fs::symlink_status(p, ec).type() != fs::file_type::not_found && !ec;
  };
  if (present(dir / kIndex)) {
    std::set<std::string> seen;
    for (const auto& [name, file] : read_index(dir / kIndex)) {
      const std::string p = (dir / file).string();
      w.index.emplace(name, p);
      if (seen.insert(p).second) w.files.push_back(p);
    }
    return w;
  }
  SNUG_CHECK(present(dir / kSingle), path, ": no ", kSingle, " or ", kIndex,
             " (the weights of a Hugging Face model folder)");
  w.files.push_back((dir / kSingle).string());
  return w;
}

std::string list_names(const std::vector<std::string>& names) {
  std::string list;
  for (size_t i = 0; i < names.size() && i < 5; ++i)
    list += (i ? ", '" : "'") + excerpt(names[i]) + "'";
  if (names.size() > 5) list += ", ...";
  return list;
}

bool under_any(const std::string& name, const std::vector<std::string>& prefixes) {
  for (const std::string& p : prefixes)
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

// The parameter a file tensor fills: its own name, or with the optional prefix, or (legacy BERT
// files) with LayerNorm.gamma/.beta spelled .weight/.bias.
Parameter* find_parameter(Model& model, const std::string& name, const HfWeightRules& rules) {
  std::vector<std::string> spellings{name};
  if (rules.legacy_norm_names) {
    for (const auto& [from, to] :
         {std::pair<std::string, std::string>{"LayerNorm.gamma", "LayerNorm.weight"},
          {"LayerNorm.beta", "LayerNorm.bias"}})
      if (name.ends_with(from)) spellings.push_back(name.substr(0, name.size() - from.size()) + to);
  }
  const std::string& pre = rules.optional_prefix;
  for (const std::string& n : spellings) {
    if (Parameter* p = model.find(n)) return p;
    if (!pre.empty() && n.rfind(pre, 0) != 0)
      if (Parameter* p = model.find(pre + n)) return p;
  }
  return nullptr;
}

}  // namespace

std::vector<std::string> hf_weight_files(const std::string& path) {
  return weight_files(path).files;
}

HfLoadReport load_hf_weights(Model& model, const std::string& path, const HfWeightRules& rules) {
  const WeightFiles wf = weight_files(path);
  const std::string& desc = rules.model_desc;
  HfLoadReport report;
  report.init_seed = rules.init_seed;

  // Pass 1 (headers only): which file holds which parameter, and that nothing else is there.
  struct Source {
    size_t file;
    std::string name;  // as spelled in the file
  };
  std::map<const Parameter*, Source> source;
  std::map<std::string, size_t> tied_at;  // rules.tied_name / tied_to spelled in the file
  std::vector<std::string> unexpected;
  for (size_t fi = 0; fi < wf.files.size(); ++fi) {
    const SafetensorsFile f(wf.files[fi]);
    for (const std::string& name : f.names()) {
      if (!wf.index.empty()) {
        const auto it = wf.index.find(name);
        SNUG_CHECK(it != wf.index.end() && it->second == wf.files[fi], wf.files[fi], ": tensor '",
                   excerpt(name), "' is not mapped to this shard by ", kIndex);
      }
      const std::string& pre = rules.optional_prefix;
      Parameter* p = find_parameter(model, name, rules);
      if (p != nullptr) {
        SNUG_CHECK(source.emplace(p, Source{fi, name}).second, path, ": parameter '", p->name,
                   "' appears twice",
                   pre.empty() ? "" : " (with and without the '" + pre + "' prefix)");
      } else if (!rules.tied_name.empty() && name == rules.tied_name) {
        tied_at[name] = fi;
      } else if (under_any(name, rules.unused_prefixes) ||
                 (!pre.empty() && under_any(pre + name, rules.unused_prefixes))) {
        report.unused.push_back(name);
      } else {
        bool ignored = false;
        for (const std::string& s : rules.ignored_suffixes) ignored = ignored || name.ends_with(s);
        if (!ignored) unexpected.push_back(name);
      }
    }
  }
  std::set<std::string> found;
  for (const auto& [p, s] : source) found.insert(s.name);
  for (const auto& [name, file] : wf.index) {
    if (found.count(name) == 0 && tied_at.count(name) == 0 &&
        std::find(report.unused.begin(), report.unused.end(), name) == report.unused.end()) {
      bool ignored = false;
      for (const std::string& s : rules.ignored_suffixes) ignored = ignored || name.ends_with(s);
      SNUG_CHECK(ignored, file, ": no tensor '", excerpt(name), "', which ", kIndex, " maps to it");
    }
  }
  SNUG_CHECK(unexpected.empty(), path, ": ", unexpected.size(), " tensor(s) that ", desc,
             " does not have: ", list_names(unexpected));
  for (const Parameter* p : model.parameters()) {
    if (source.count(p) != 0) continue;
    SNUG_CHECK(under_any(p->name, rules.fresh_prefixes), path, ": no tensor '", p->name,
               "' (needed by ", desc, ")");
    report.initialized.push_back(p->name);
  }
  // The absent head keeps the family's initialization; what the file has overwrites the rest.
  // (On meta the device's op table drops the values: no device branch here.)
  if (!report.initialized.empty()) model.init_weights(rules.init_seed);

  // Pass 2: shard by shard, tensor by tensor, converted into the parameters' storage.
  for (size_t fi = 0; fi < wf.files.size(); ++fi) {
    std::unique_ptr<SafetensorsFile> f;
    for (Parameter* p : model.parameters()) {
      const auto src = source.find(p);
      if (src == source.end() || src->second.file != fi) continue;  // (a fresh head: not here)
      const Source& s = src->second;
      if (!f) f = std::make_unique<SafetensorsFile>(wf.files[fi]);
      const SafetensorsFile::Info& inf = f->info(s.name);
      SNUG_CHECK(inf.shape == p->shape(), wf.files[fi], ": tensor '", excerpt(s.name),
                 "' has shape ", shape_str(inf.shape), ", ", desc, " needs ",
                 shape_str(p->shape()));
      SNUG_CHECK(inf.dtype == "F32" || inf.dtype == "F16" || inf.dtype == "BF16", wf.files[fi],
                 ": tensor '", excerpt(s.name), "' is ", inf.dtype,
                 "; weights must be F32, F16 or BF16");
      if (p->sliced()) {
        read_into_slice(*f, s.name, *p, true);  // partitioned at construction (ZeRO stage 3)
      } else if (!p->quantized()) {
        f->read_into(s.name, p->value);
        check_finite(p->value, wf.files[fi], s.name);
      } else {
        // --load-in-8bit/4bit: read into host staging and quantize (the fp32 tensor never
        // occupies the device, as a bitsandbytes load; a meta weight keeps no codes).
        Device staging(cpu_backend());
        Tensor host = Tensor::empty(p->shape(), DType::f32, Category::weights, staging);
        f->read_into(s.name, host);
        check_finite(host, wf.files[fi], s.name);
        quantize_weight_into(*p->quant, host.data<float>(), p->name);
      }
    }
  }

  // A tied head in the file must equal what it is tied to (snug keeps one tensor).
  if (const auto it = tied_at.find(rules.tied_name); it != tied_at.end()) {
    const Parameter* to = model.find(rules.tied_to);
    SNUG_ASSERT(to != nullptr, "tied_to '", rules.tied_to, "' is not a parameter");
    const Source& s = source.at(to);
    const SafetensorsFile head(wf.files[it->second]);
    const SafetensorsFile emb(wf.files[s.file]);
    SNUG_CHECK(head.info(rules.tied_name).shape == emb.info(s.name).shape &&
                   head.read_f32(rules.tied_name) == emb.read_f32(s.name),
               path, ": '", rules.tied_name, "' differs from '", excerpt(s.name), "'; ",
               rules.tie_note);
  }
  return report;
}

void read_into_slice(const SafetensorsFile& f, const std::string& name, Parameter& p,
                     bool check_finite_values) {
  if (p.shard.is_meta()) return;
  Device staging(cpu_backend());
  Tensor host = Tensor::empty(p.shape(), p.shard.dtype(), Category::weights, staging);
  f.read_into(name, host);
  if (check_finite_values) check_finite(host, f.path(), name);
  nn::store_slice(p, host);
}

std::string HfLoadReport::describe() const {
  std::string out;
  if (!initialized.empty())
    out += std::to_string(initialized.size()) + " parameter(s) not in the checkpoint, newly " +
           "initialized from --seed " + std::to_string(init_seed) +
           " (train them before use): " + list_names(initialized);
  if (!unused.empty())
    out += std::string(out.empty() ? "" : "; ") + std::to_string(unused.size()) +
           " checkpoint tensor(s) of another head, not used: " + list_names(unused);
  return out;
}

void save_hf_weights(const Model& model, const std::string& path,
                     const std::map<std::string, std::string>& extra) {
  // (A meta model has no values: save_safetensors refuses its tensors, naming them.)
  if (!model.device().is_meta()) {
    // Refused before writing when it cannot fit (io/disk_space.h): the data, a bound of the
    // header (name and 160 bytes of JSON per tensor) and 64 KiB of metadata.
    int64_t bytes = 65536;
    for (const Parameter* p : model.parameters())
      bytes += (p->quantized() ? 4 * shape_numel(p->shape()) : p->value.nbytes()) + 160 +
               static_cast<int64_t>(p->name.size());
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    check_disk_space(parent.empty() ? "." : parent.string(), bytes, path);
  }
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  // Quantized weights are written dequantized (fp32), staged outside the model's pool.
  Device staging(cpu_backend());
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

}  // namespace snug

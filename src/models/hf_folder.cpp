#include "models/hf_folder.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>
#include <utility>

#include "core/error.h"
#include "io/excerpt.h"
#include "io/json_input.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "models/registry.h"

namespace snug {

namespace fs = std::filesystem;

namespace {

// transformers' config.json spelling of a torch dtype.
const char* torch_dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "float32";
    case DType::bf16:
      return "bfloat16";
    case DType::f16:
      return "float16";
    default:
      throw Error(detail::concat("a model folder stores float32, bfloat16 or float16 tensors, not ",
                                 dtype_name(t)));
  }
}

// "model-00001-of-00003.safetensors", as transformers names shards.
std::string shard_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

bool is_shard_name(const std::string& name) {
  // model-NNNNN-of-NNNNN.safetensors (any digit counts, as transformers' pattern)
  const std::string pre = "model-", mid = "-of-", suf = ".safetensors";
  if (name.rfind(pre, 0) != 0 || name.size() <= pre.size() + suf.size() ||
      name.compare(name.size() - suf.size(), suf.size(), suf) != 0)
    return false;
  const std::string core = name.substr(pre.size(), name.size() - pre.size() - suf.size());
  const size_t m = core.find(mid);
  if (m == std::string::npos || m == 0 || m + mid.size() >= core.size()) return false;
  auto digits = [](const std::string& s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return digits(core.substr(0, m)) && digits(core.substr(m + mid.size()));
}

}  // namespace

int64_t parse_shard_size(const std::string& text, const std::string& flag) {
  std::string t;
  for (char c : text) t += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  struct Unit {
    const char* suffix;
    double factor;
  };
  // Longest suffixes first ("GIB" before "B").
  static const Unit units[] = {
      {"KIB", 1024.0}, {"MIB", 1048576.0}, {"GIB", 1073741824.0}, {"TIB", 1099511627776.0},
      {"KB", 1e3},     {"MB", 1e6},        {"GB", 1e9},           {"TB", 1e12},
      {"B", 1.0}};
  double factor = 1.0;
  std::string num = t;
  for (const Unit& u : units) {
    const std::string s = u.suffix;
    if (t.size() > s.size() && t.compare(t.size() - s.size(), s.size(), s) == 0) {
      factor = u.factor;
      num = t.substr(0, t.size() - s.size());
      break;
    }
  }
  auto bad = [&] {
    return Error(detail::concat(flag, " '", excerpt(text),
                                "': not a size (bytes, or a number with KB, MB, GB, TB, KiB, "
                                "MiB, GiB or TiB, e.g. 5GB, 500MB)"));
  };
  if (num.empty() ||
      !std::all_of(num.begin(), num.end(),
                   [](char c) { return (c >= '0' && c <= '9') || c == '.'; }) ||
      std::count(num.begin(), num.end(), '.') > 1)
    throw bad();
  double v = 0;
  try {
    v = std::stod(num) * factor;
  } catch (const std::exception&) {
    throw bad();
  }
  SNUG_CHECK(std::isfinite(v) && v >= 1.0 && v < 9.0e18, flag, " '", excerpt(text),
             "' is out of range (at least 1 byte)");
  return static_cast<int64_t>(v);
}

const std::vector<std::string>& hf_side_file_names() {
  // What AutoTokenizer.save_pretrained and GenerationConfig.save_pretrained write (fast and slow
  // tokenizers: byte-level BPE, SentencePiece, WordPiece), and the chat template transformers 5
  // keeps beside them.
  static const std::vector<std::string> names = {"tokenizer.json",
                                                 "tokenizer_config.json",
                                                 "special_tokens_map.json",
                                                 "added_tokens.json",
                                                 "vocab.json",
                                                 "merges.txt",
                                                 "vocab.txt",
                                                 "tokenizer.model",
                                                 "spiece.model",
                                                 "chat_template.jinja",
                                                 "chat_template.json",
                                                 "generation_config.json"};
  return names;
}

std::vector<std::string> hf_side_files(const std::string& folder) {
  std::vector<std::string> found;
  if (folder.empty()) return found;
  std::error_code ec;
  for (const std::string& n : hf_side_file_names())
    if (fs::is_regular_file(fs::path(folder) / n, ec)) found.push_back(n);
  return found;
}

std::vector<std::string> copy_hf_side_files(const std::string& from, const std::string& to) {
  const std::vector<std::string> names = hf_side_files(from);
  for (const std::string& n : names) {
    const std::string src = (fs::path(from) / n).string();
    const std::string text = read_input_file(src, src, int64_t{1} << 30);
    const std::string dst = (fs::path(to) / n).string();
    write_output_file(dst, text, dst);
  }
  return names;
}

nlohmann::json hf_config_json(const ModelConfig& cfg, DType dtype) {
  nlohmann::json j = nlohmann::json::object();
  if (!cfg.config_path.empty()) {
    // The source's own keys; resolve_model read and validated this file already.
    const nlohmann::json src = parse_json_input(
        read_input_file(cfg.config_path, cfg.config_path, int64_t{1} << 24), cfg.config_path);
    if (src.is_object()) j = src;
  }
  // A null the resolved config holds for a key the source did not set ("head_dim": null, for
  // "derived from the other keys") is not written: transformers would read it as an explicit
  // None, which is not what leaving it out means to its config classes.
  for (const auto& [k, v] : cfg.hf.items())
    if (!v.is_null() || j.contains(k)) j[k] = v;
  const Architecture& arch = architecture(cfg.shape.model_type);
  // The class: the resolved config's own "architectures" (a family whose head varies writes it),
  // else the family's causal LM class, over whatever the source named.
  if (!cfg.hf.contains("architectures") && arch.hf_class != nullptr)
    j["architectures"] = nlohmann::json::array({arch.hf_class});
  j.erase("torch_dtype");  // transformers 5 writes "dtype" (and reads either)
  j["dtype"] = torch_dtype_name(dtype);
  return j;
}

std::vector<HfTensor> hf_model_tensors(const Model& model) {
  std::set<const Parameter*> adapters;
  for (const LoraAdapter& ad : model.lora_adapters()) adapters.insert({ad.A, ad.B});
  std::vector<HfTensor> out;
  for (const Parameter* p : model.parameters()) {
    if (adapters.count(p) != 0) continue;
    out.push_back({p->name, p->shape(), [&model, p](float* dst) { model.read_values(*p, dst); }});
  }
  return out;
}

std::vector<std::vector<size_t>> plan_shards(const std::vector<int64_t>& bytes, int64_t max_bytes) {
  std::vector<std::vector<size_t>> shards;
  std::vector<size_t> current;
  int64_t current_bytes = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] > max_bytes) {
      shards.push_back({i});
      continue;
    }
    if (current_bytes + bytes[i] > max_bytes) {
      shards.push_back(std::move(current));
      current.clear();
      current_bytes = 0;
    }
    current.push_back(i);
    current_bytes += bytes[i];
  }
  if (!current.empty()) shards.push_back(std::move(current));
  return shards;
}

HfFolderWritten save_hf_folder(const std::string& dir, const nlohmann::json& config,
                               const std::vector<HfTensor>& tensors,
                               const std::string& source_folder, const HfFolderOptions& o) {
  SNUG_CHECK(o.max_shard_bytes >= 1, dir, ": the shard size must be at least 1 byte");
  torch_dtype_name(o.dtype);  // one of the three
  std::error_code ec;
  SNUG_CHECK(!fs::exists(dir, ec) || fs::is_directory(dir, ec), dir,
             ": exists and is not a folder (a model folder is written there)");
  fs::create_directories(dir, ec);
  SNUG_CHECK(!ec, dir, ": cannot create the model folder: ", ec.message());
  const fs::path d(dir);
  const auto esize = static_cast<int64_t>(dtype_size(o.dtype));

  std::vector<int64_t> bytes;
  HfFolderWritten w;
  int64_t total_params = 0;
  for (const HfTensor& t : tensors) {
    bytes.push_back(shape_numel(t.shape) * esize);
    w.total_bytes += bytes.back();
    total_params += shape_numel(t.shape);
  }
  const std::vector<std::vector<size_t>> shards = plan_shards(bytes, o.max_shard_bytes);
  std::map<std::string, std::string> meta = o.metadata;
  meta["format"] = "pt";
  nlohmann::json weight_map = nlohmann::json::object();
  std::vector<float> staging;  // one tensor's fp32 values when the folder's dtype is 16-bit
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string name =
        shards.size() == 1 ? kHfSingleWeightsFile : shard_name(s, shards.size());
    std::vector<SafetensorsEntry> entries;
    for (size_t i : shards[s]) {
      entries.push_back({tensors[i].name, o.dtype, tensors[i].shape});
      weight_map[tensors[i].name] = name;
    }
    save_safetensors_streamed((d / name).string(), entries, meta, [&](size_t k, void* dst) {
      const HfTensor& t = tensors[shards[s][k]];
      const auto n = static_cast<size_t>(shape_numel(t.shape));
      if (o.dtype == DType::f32) {
        t.values(static_cast<float*>(dst));
        return;
      }
      staging.resize(n);
      t.values(staging.data());
      convert(staging.data(), DType::f32, dst, o.dtype, n);
      if (staging.capacity() > 2 * n) staging = {};  // hold at most about one tensor
    });
    w.weight_files.push_back(name);
  }
  if (shards.empty()) {
    // No tensors: still one (empty) model.safetensors, as a folder needs weights.
    save_safetensors_streamed((d / kHfSingleWeightsFile).string(), {}, meta, [](size_t, void*) {});
    w.weight_files.push_back(kHfSingleWeightsFile);
  }
  const std::string index_path = (d / kHfWeightsIndexFile).string();
  if (w.weight_files.size() > 1) {
    const nlohmann::json index = {
        {"metadata", {{"total_parameters", total_params}, {"total_size", w.total_bytes}}},
        {"weight_map", weight_map}};
    write_output_file(index_path, index.dump(2) + "\n", index_path);
  }
  // What an earlier save left that this one replaces (save_pretrained removes them too).
  const std::set<std::string> mine(w.weight_files.begin(), w.weight_files.end());
  std::vector<fs::path> stale;
  for (const fs::directory_entry& e : fs::directory_iterator(d, ec)) {
    const std::string n = e.path().filename().string();
    const bool stale_weights =
        (n == kHfSingleWeightsFile || is_shard_name(n)) && mine.count(n) == 0;
    const bool stale_index = n == kHfWeightsIndexFile && w.weight_files.size() == 1;
    if (e.is_regular_file() && (stale_weights || stale_index)) stale.push_back(e.path());
  }
  for (const fs::path& p : stale) {
    fs::remove(p, ec);
    SNUG_CHECK(!ec, p.string(), ": cannot remove the weights of an earlier save: ", ec.message());
  }
  const std::string cfg_path = (d / kHfConfigFile).string();
  write_output_file(cfg_path, config.dump(2) + "\n", cfg_path);
  if (!source_folder.empty() &&
      fs::weakly_canonical(source_folder, ec) != fs::weakly_canonical(d, ec))
    w.side_files = copy_hf_side_files(source_folder, dir);
  return w;
}

bool hf_folder_has_weights(const std::string& dir) {
  // Any entry by these names counts, whatever it is: a dangling symlink (a Hugging Face cache
  // snapshot whose blob is missing), a FIFO or a directory is refused where the weights are
  // opened (io/safetensors.h), never taken for "no weights" and a randomly initialized model.
  std::error_code ec;
  for (const char* name : {kHfSingleWeightsFile, kHfWeightsIndexFile})
    if (fs::symlink_status(fs::path(dir) / name, ec).type() != fs::file_type::not_found && !ec)
      return true;
  return false;
}

bool is_folder_output(const std::string& path) {
  const std::string suf = ".safetensors";
  return !(path.size() >= suf.size() &&
           path.compare(path.size() - suf.size(), suf.size(), suf) == 0);
}

}  // namespace snug

#include "train/zero_checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "io/output_file.h"
#include "io/safetensors.h"
#include "train/checkpoint.h"
#include "train/trainer_state.h"

namespace snug {

namespace fs = std::filesystem;

namespace {

// Objects merged by key (the first value of a key wins), anything else: the first.
nlohmann::json merge(nlohmann::json a, const nlohmann::json& b) {
  if (!a.is_object() || !b.is_object()) return a.is_null() ? b : a;
  for (auto it = b.begin(); it != b.end(); ++it)
    a[it.key()] = a.contains(it.key()) ? merge(a[it.key()], it.value()) : it.value();
  return a;
}

// A saved file and the element range [first, last) of each parameter it holds.
struct Source {
  std::string name;
  std::unique_ptr<SafetensorsFile> file;
  std::unordered_map<std::string, std::pair<int64_t, int64_t>> ranges;
};

}  // namespace

std::string zero_shard_file_name(int rank, int world) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "optimizer.rank-%05d-of-%05d.safetensors", rank, world);
  return buf;
}

bool is_sharded_checkpoint(const nlohmann::json& files) {
  return files.is_object() && files.contains(kZeroIndexFile);
}

std::string write_zero_shard(const std::string& dir, ZeroOptimizer& z, int rank, int world) {
  const std::string name = zero_shard_file_name(rank, world);
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  for (const auto& [n, t] : z.state_tensors()) tensors.emplace_back(n, t);
  save_safetensors((fs::path(dir) / name).string(), tensors,
                   {{"optimizer", z.name()}, {"extra_state", z.extra_state().dump()}});
  return name;
}

namespace {

// Stage 3's index: each parameter padded on its own, each rank's element range of every one.
nlohmann::json zero3_index(const ZeroOptimizer& z, int world, std::vector<std::string>& names) {
  const Zero3Parameters& zp = z.partitioned();
  nlohmann::json j;
  j["world_size"] = world;
  j["zero_stage"] = 3;
  j["layout"] = "per_parameter";
  j["numel"] = zp.numel();
  j["padded"] = zp.padded();
  j["shard"] = zp.shard();
  j["shards"] = nlohmann::json::array();
  for (int r = 0; r < world; ++r) {
    names.push_back(zero_shard_file_name(r, world));
    nlohmann::json ranges = nlohmann::json::array();
    for (const Zero3Entry& e : zp.entries()) {
      const int64_t a = std::min(e.numel, r * e.shard), b = std::min(e.numel, (r + 1) * e.shard);
      if (a < b) ranges.push_back({{"name", e.p->name}, {"begin", a}, {"end", b}});
    }
    j["shards"].push_back({{"file", names.back()}, {"rank", r}, {"parameters", ranges}});
  }
  j["parameters"] = nlohmann::json::array();
  for (const Zero3Entry& e : zp.entries())
    j["parameters"].push_back({{"name", e.p->name},
                               {"numel", e.numel},
                               {"padded", e.padded},
                               {"shard", e.shard},
                               {"offset", e.offset}});
  return j;
}

}  // namespace

std::vector<std::string> write_zero_index(const std::string& dir, const ZeroOptimizer& z,
                                          int world) {
  if (z.stage() == 3) {
    std::vector<std::string> names = {kZeroIndexFile};
    const nlohmann::json j = zero3_index(z, world, names);
    write_output_file((fs::path(dir) / kZeroIndexFile).string(), j.dump(2) + "\n",
                      "the optimizer index");
    return names;
  }
  const FlatLayout& l = z.layout();
  nlohmann::json j;
  j["world_size"] = world;
  j["zero_stage"] = z.stage();
  j["layout"] = "flat";
  j["numel"] = l.numel;
  j["padded"] = l.padded;
  j["shard"] = l.shard;
  std::vector<std::string> names = {kZeroIndexFile};
  j["shards"] = nlohmann::json::array();
  for (int r = 0; r < world; ++r) {
    names.push_back(zero_shard_file_name(r, world));
    j["shards"].push_back(
        {{"file", names.back()}, {"rank", r}, {"begin", l.begin(r)}, {"end", l.end(r)}});
  }
  j["parameters"] = nlohmann::json::array();
  for (const FlatLayout::Entry& e : l.entries)
    j["parameters"].push_back({{"name", e.p->name}, {"offset", e.offset}, {"numel", e.p->numel()}});
  write_output_file((fs::path(dir) / kZeroIndexFile).string(), j.dump(2) + "\n",
                    "the optimizer index");
  return names;
}

void load_recut_optimizer_state(const std::string& dir, const nlohmann::json& files,
                                Optimizer& optimizer, const ZeroOptimizer* z,
                                const ParameterList& params) {
  const fs::path d(dir);
  // What was saved: the shards and their ranges, or one file of whole tensors.
  std::vector<Source> sources;
  nlohmann::json extra;
  if (is_sharded_checkpoint(files)) {
    verify_checkpoint_file(dir, kZeroIndexFile, files);
    const std::string where = (d / kZeroIndexFile).string();
    nlohmann::json index;
    try {
      std::ifstream in(where);
      index = nlohmann::json::parse(in);
      for (const nlohmann::json& sh : index.at("shards")) {
        Source s;
        s.name = sh.at("file").get<std::string>();
        if (sh.contains("parameters")) {  // stage 3: each parameter's range, as saved
          for (const nlohmann::json& p : sh.at("parameters"))
            s.ranges[p.at("name").get<std::string>()] = {p.at("begin").get<int64_t>(),
                                                         p.at("end").get<int64_t>()};
          sources.push_back(std::move(s));
          continue;
        }
        const int64_t lo = sh.at("begin"), hi = sh.at("end");
        for (const nlohmann::json& p : index.at("parameters")) {
          const int64_t off = p.at("offset"), n = p.at("numel");
          const int64_t a = std::max(lo, off), b = std::min(hi, off + n);
          if (a < b) s.ranges[p.at("name").get<std::string>()] = {a - off, b - off};
        }
        sources.push_back(std::move(s));
      }
    } catch (const nlohmann::json::exception& e) {
      throw Error(detail::concat(where, ": not an optimizer index (", e.what(), ")"));
    }
  } else {
    Source s;
    s.name = kCheckpointOptimizerFile;  // the unsharded file
    for (const Parameter* p : params)
      if (!p->quantized()) s.ranges[p->name] = {0, p->numel()};
    sources.push_back(std::move(s));
    extra = read_trainer_state(dir).optimizer_extra;
  }
  for (Source& s : sources) {
    verify_checkpoint_file(dir, s.name, files);
    s.file = std::make_unique<SafetensorsFile>((d / s.name).string());
    const auto meta = s.file->metadata();
    if (const auto it = meta.find("extra_state"); it != meta.end())
      extra = merge(extra, nlohmann::json::parse(it->second, nullptr, false));
  }
  // Where each of this run's state tensors lies: its parameter and first element.
  std::unordered_map<std::string, int64_t> first;
  if (z != nullptr) {
    for (const ZeroPiece& pc : z->pieces())
      if (pc.source != nullptr) first[pc.source->name] = pc.begin;
  } else {
    for (const Parameter* p : params) first[p->name] = 0;
  }
  for (const auto& [name, t] : optimizer.state_tensors()) {
    if (name.rfind(std::string(kZeroPaddingName) + ".", 0) == 0) {
      t->zero_();  // the padding's state: its gradient is always zero
      continue;
    }
    std::string param;
    for (size_t dot = name.rfind('.'); dot != std::string::npos && dot > 0;
         dot = name.rfind('.', dot - 1))
      if (first.count(name.substr(0, dot)) != 0) {
        param = name.substr(0, dot);
        break;
      }
    SNUG_CHECK(!param.empty(), dir, ": optimizer state '", name,
               "' belongs to no parameter of this run");
    SNUG_CHECK(t->dtype() == DType::f32 || t->dtype() == DType::bf16, dir, ": optimizer state '",
               name, "' is ", dtype_name(t->dtype()),
               "; only fp32 or bf16 (--bf16-full) elementwise state is re-cut");
    const int64_t lo = first[param], hi = lo + t->numel();
    std::vector<float> host(static_cast<size_t>(t->numel()), 0.0f);
    int64_t covered = 0;
    for (const Source& s : sources) {
      const auto it = s.ranges.find(param);
      if (it == s.ranges.end()) continue;
      const auto [slo, shi] = it->second;
      const int64_t a = std::max(lo, slo), b = std::min(hi, shi);
      if (a >= b) continue;
      SNUG_CHECK(s.file->contains(name), s.file->path(), ": no tensor '", name, "'");
      const std::vector<float> saved = s.file->read_f32(name);
      SNUG_CHECK(static_cast<int64_t>(saved.size()) == shi - slo, s.file->path(), ": tensor '",
                 name, "' has ", saved.size(), " elements, its parameter's range there ",
                 shi - slo);
      std::copy(saved.begin() + (a - slo), saved.begin() + (b - slo), host.begin() + (a - lo));
      covered += b - a;
    }
    SNUG_CHECK(covered == hi - lo, dir, ": the saved optimizer state covers ", covered, " of the ",
               hi - lo, " elements of '", name, "' this run needs");
    if (t->dtype() == DType::bf16) {
      // Saved as bf16 (read widened, exactly): back to the same bits.
      std::vector<uint16_t> bits(host.size());
      for (size_t i = 0; i < host.size(); ++i) bits[i] = f32_to_bf16(host[i]);
      t->device().upload(t->data_u16(), bits.data(), t->numel());
    } else {
      t->device().upload(t->data<float>(), host.data(), t->numel());
    }
  }
  try {
    optimizer.load_extra_state(extra.is_null() ? nlohmann::json::object() : extra);
  } catch (const nlohmann::json::exception& e) {
    throw Error(detail::concat(dir,
                               ": the optimizer's extra_state does not carry over to this "
                               "run's layout (",
                               e.what(), ")"));
  }
}

}  // namespace snug

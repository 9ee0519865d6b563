#include "train/quantized_base_file.h"

#include <fstream>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/host_staging.h"
#include "io/excerpt.h"
#include "quant/weight_quant.h"

namespace snug {

namespace {

// The defined tensors of a quantized weight under their checkpoint names.
std::vector<std::pair<std::string, Tensor*>> parts(const Parameter& p) {
  QuantizedWeight& q = *p.quant;
  std::vector<std::pair<std::string, Tensor*>> out;
  const std::pair<const char*, Tensor*> all[] = {{".codes", &q.codes},
                                                 {".absmax", &q.absmax},
                                                 {".dq_codes", &q.dq_codes},
                                                 {".dq_absmax", &q.dq_absmax},
                                                 {".dq_offset", &q.dq_offset}};
  for (const auto& [suffix, t] : all)
    if (t->defined()) out.emplace_back(p.name + suffix, t);
  return out;
}

const char* base_file_dtype(DType t) {
  return t == DType::u8 ? "U8" : "F32";
}

// One description of the base's quantization (all quantized parameters share the run's config).
std::string describe_quantization(const Model& model) {
  for (const Parameter* p : model.parameters())
    if (p->quantized()) return p->quant->cfg.describe();
  return "";
}

}  // namespace

bool has_quantized_base(const Model& model) {
  for (const Parameter* p : model.parameters())
    if (p->quantized()) return true;
  return false;
}

int64_t quantized_base_bytes(const Model& model) {
  int64_t bytes = 0;
  for (const Parameter* p : model.parameters())
    if (p->quantized())
      for (const auto& [name, t] : parts(*p)) bytes += t->nbytes();
  return bytes;
}

void save_quantized_base(const std::string& path, const Model& model) {
  SNUG_CHECK(!model.device().is_meta(), "cannot write the quantized base to '", path,
             "' from a model on the meta device");
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  for (const Parameter* p : model.parameters())
    if (p->quantized())
      for (const auto& [name, t] : parts(*p)) tensors.emplace_back(name, t);
  save_safetensors(path, tensors, {{"quantization", describe_quantization(model)}});
}

void load_quantized_base(const std::string& path, Model& model) {
  if (model.device().is_meta()) return;
  const SafetensorsFile f(path);
  const std::string want = describe_quantization(model);
  const auto& meta = f.metadata();
  const auto it = meta.find("quantization");
  const std::string have = it == meta.end() ? "(none recorded)" : it->second;
  SNUG_CHECK(have == want, path, ": the base was stored quantized as ", excerpt(have),
             ", this run quantizes it as ", want,
             " (--load-in-8bit/--load-in-4bit, --bnb-4bit-quant-type and "
             "--bnb-4bit-use-double-quant must be the run's)");
  size_t expected = 0;
  for (Parameter* p : model.parameters()) {
    if (!p->quantized()) continue;
    for (const auto& [name, t] : parts(*p)) {
      ++expected;
      SNUG_CHECK(f.contains(name), path, ": no tensor '", name, "'");
      SNUG_CHECK(f.info(name).dtype == base_file_dtype(t->dtype()), path, ": tensor '", name,
                 "' is ", f.info(name).dtype, ", expected ", base_file_dtype(t->dtype()));
      read_raw_tensor(f, name, *t);
    }
  }
  SNUG_CHECK(f.names().size() == expected, path, ": holds ", f.names().size(),
             " tensors, the quantized base has ", expected);
}

void read_raw_tensor(const SafetensorsFile& f, const std::string& name, Tensor& t) {
  const SafetensorsFile::Info& inf = f.info(name);
  SNUG_CHECK(inf.end - inf.begin == t.nbytes(), f.path(), ": tensor '", name, "' has ",
             inf.end - inf.begin, " bytes, expected ", t.nbytes());
  std::ifstream in(f.path(), std::ios::binary);
  SNUG_CHECK(in.good(), f.path(), ": cannot open");
  uint8_t len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | len[i];
  in.seekg(static_cast<std::streamoff>(8 + header + static_cast<uint64_t>(inf.begin)));
  const HostStaging h(t, HostStaging::Use::write);  // t's own bytes on cpu
  in.read(static_cast<char*>(h.raw()), static_cast<std::streamsize>(t.nbytes()));
  SNUG_CHECK(in.good(), f.path(), ": short read of tensor '", name, "'");
  h.upload();
}

}  // namespace snug

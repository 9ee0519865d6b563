// A Hugging Face model folder's weights (models/hf_weights.h): model.safetensors or the shards
// an index lists load exactly as one file does, fp16/bf16 tensors convert as they load, and a
// folder that does not add up (no weights, a shard the index does not describe, a tensor in no
// shard) is one clear error naming the file and the tensor.
#include "models/hf_weights.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "support/param_bytes.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace hf_weights_test {

using test::TempDir;

// Writes the model's parameters as two shards (the first `split` parameters, then the rest) and
// an index mapping each name to its shard, as save_pretrained(max_shard_size=...) does.
void save_sharded(const Model& m, const std::filesystem::path& dir, size_t split,
                  const nlohmann::json& index_patch = {}) {
  std::filesystem::create_directories(dir);
  std::vector<std::pair<std::string, const Tensor*>> a, b;
  nlohmann::json map = nlohmann::json::object();
  for (size_t i = 0; i < m.parameters().size(); ++i) {
    const Parameter* p = m.parameters()[i];
    const char* shard =
        i < split ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    (i < split ? a : b).emplace_back(p->name, &p->value);
    map[p->name] = shard;
  }
  save_safetensors((dir / "model-00001-of-00002.safetensors").string(), a, {{"format", "pt"}});
  save_safetensors((dir / "model-00002-of-00002.safetensors").string(), b, {{"format", "pt"}});
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", map}};
  if (!index_patch.is_null()) index.merge_patch(index_patch);
  std::ofstream(dir / "model.safetensors.index.json") << index.dump(2);
}

std::string load_error(Model& m, const std::string& path) {
  try {
    load_model_weights(m, path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct Models {
  Device dev{cpu_backend()};
  ModelConfig cfg = resolve_model("gpt2-tiny");
  std::unique_ptr<Model> a = create_model(cfg, dev), b = create_model(cfg, dev);
  Models() {
    a->init_weights(1);
    b->init_weights(2);
  }
};

TEST(HfWeights, ShardedFolderLoadsAsOneFileDoes) {
  TempDir tmp;
  Models m;
  save_sharded(*m.a, tmp.path("sharded"), 5);
  EXPECT_EQ(hf_weight_files(tmp.path("sharded")).size(), 2u);
  load_model_weights(*m.b, tmp.path("sharded"));
  EXPECT_TRUE(test::same_values(*m.a, *m.b));
}

TEST(HfWeights, FolderWithModelSafetensorsLoads) {
  TempDir tmp;
  Models m;
  std::filesystem::create_directories(tmp.path("single"));
  save_model_weights(*m.a, tmp.path("single") + "/model.safetensors");
  EXPECT_EQ(hf_weight_files(tmp.path("single")),
            std::vector<std::string>{tmp.path("single") + "/model.safetensors"});
  load_model_weights(*m.b, tmp.path("single"));
  EXPECT_TRUE(test::same_values(*m.a, *m.b));
}

TEST(HfWeights, Bf16TensorsConvertAsTheyLoad) {
  // A bf16 checkpoint into an fp32 model: each value is the bf16 rounding of the original.
  TempDir tmp;
  Models m;
  Device host(cpu_backend());
  std::vector<Tensor> halves;
  std::vector<std::pair<std::string, const Tensor*>> t;
  halves.reserve(m.a->parameters().size());
  for (const Parameter* p : m.a->parameters()) {
    halves.push_back(Tensor::empty(p->shape(), DType::bf16, Category::weights, host));
    const float* src = p->value.data<float>();
    auto* dst = static_cast<uint16_t*>(halves.back().raw());
    for (int64_t i = 0; i < p->value.numel(); ++i) dst[i] = f32_to_bf16(src[i]);
    t.emplace_back(p->name, &halves.back());
  }
  std::filesystem::create_directories(tmp.path("bf16"));
  save_safetensors(tmp.path("bf16") + "/model.safetensors", t);
  load_model_weights(*m.b, tmp.path("bf16"));
  for (size_t i = 0; i < m.a->parameters().size(); ++i) {
    const Tensor& got = m.b->parameters()[i]->value;
    const auto* want = static_cast<const uint16_t*>(halves[i].raw());
    for (int64_t j = 0; j < got.numel(); ++j)
      ASSERT_EQ(got.data<float>()[j], bf16_to_f32(want[j])) << m.a->parameters()[i]->name;
  }
}

TEST(HfWeights, FoldersThatDoNotAddUpAreClearErrors) {
  TempDir tmp;
  Models m;
  std::filesystem::create_directories(tmp.path("empty"));
  std::string msg = load_error(*m.b, tmp.path("empty"));
  EXPECT_NE(msg.find("no model.safetensors or model.safetensors.index.json"), std::string::npos)
      << msg;

  // The index maps a tensor to the other shard than the one holding it.
  const std::string first = m.a->parameters()[0]->name;
  save_sharded(*m.a, tmp.path("moved"), 5,
               {{"weight_map", {{first, "model-00002-of-00002.safetensors"}}}});
  msg = load_error(*m.b, tmp.path("moved"));
  EXPECT_NE(msg.find("'" + first + "' is not mapped to this shard"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model-00001-of-00002.safetensors"), std::string::npos) << msg;

  // The index names a tensor no shard holds.
  save_sharded(*m.a, tmp.path("ghost"), 5,
               {{"weight_map",
                 {{"transformer.h.0.attn.c_attn.ghost", "model-00001-of-00002.safetensors"}}}});
  msg = load_error(*m.b, tmp.path("ghost"));
  EXPECT_NE(msg.find("no tensor 'transformer.h.0.attn.c_attn.ghost'"), std::string::npos) << msg;

  // A shard the index lists is missing.
  save_sharded(*m.a, tmp.path("lost"), 5);
  std::filesystem::remove(tmp.path("lost") + "/model-00002-of-00002.safetensors");
  msg = load_error(*m.b, tmp.path("lost"));
  EXPECT_NE(msg.find("model-00002-of-00002.safetensors"), std::string::npos) << msg;

  // An index that is not one.
  std::filesystem::create_directories(tmp.path("bad"));
  std::ofstream(tmp.path("bad") + "/model.safetensors.index.json") << "{\"weight_map\": 3}";
  msg = load_error(*m.b, tmp.path("bad"));
  EXPECT_NE(msg.find("no 'weight_map' object"), std::string::npos) << msg;
}

}  // namespace hf_weights_test
}  // namespace
}  // namespace snug

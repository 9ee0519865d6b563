// config.json and the weights of a model folder are untrusted (issue 29, item 6): a megabyte
// value, key, tensor name or shard name is quoted as a short excerpt in every refusal, which still
// names the file and the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "models/hf_weights.h"
#include "models/registry.h"
#include "support/bounded_quote.h"
#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace models_bounded_quotes_test {

namespace fs = std::filesystem;
using nlohmann::json;

json fixture_config(const std::string& folder) {
  std::ifstream in(std::string(SNUG_TEST_DATA_DIR) + "/hf/" + folder + "/config.json");
  return json::parse(in);
}

// parse_model_config of the fixture's config.json with `patch` merged in, named `spec`.
auto parse_patched(const std::string& folder, const json& patch, const std::string& spec) {
  json j = fixture_config(folder);
  for (const auto& [k, v] : patch.items()) j[k] = v;
  return [text = j.dump(), spec] { (void)parse_model_config(text, spec); };
}

TEST(BoundedQuotes, ConfigJsonValuesAndKeys) {
  const std::string big = megabyte();
  const std::string spec = "some/folder/config.json";
  auto refuses = [&](const std::string& folder, const json& patch,
                     std::initializer_list<std::string_view> parts) {
    return refuses_bounded(parse_patched(folder, patch, spec), parts);
  };
  // The llama family (mistral's fixture): string values, a key, values of the wrong type.
  EXPECT_TRUE(refuses("mistral_gqa", {{"hidden_act", big}}, {spec, "'hidden_act'", "(1048576"}));
  EXPECT_TRUE(refuses("mistral_gqa", {{"model_type", big}}, {spec, "model_type 'xxxx"}));
  EXPECT_TRUE(refuses("mistral_gqa", {{"rope_scaling", {{"type", big}}}},
                      {spec, "'rope_scaling'", "rope type 'xxxx"}));
  EXPECT_TRUE(refuses("mistral_gqa", {{"rope_scaling", {{"type", "linear"}, {"rope_type", big}}}},
                      {spec, "'rope_scaling'", "two types"}));
  EXPECT_TRUE(refuses("mistral_gqa",
                      {{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}, {big, 1}}}},
                      {spec, "'rope_scaling'", "has 'xxxx"}));
  EXPECT_TRUE(refuses("mistral_gqa", {{"rope_scaling", {{"type", "linear"}, {"factor", big}}}},
                      {spec, "'rope_scaling'", "'factor' must be a finite number"}));
  EXPECT_TRUE(refuses("mistral_gqa", {{"rope_scaling", json::array({big})}},
                      {spec, "'rope_scaling'", "must be an object"}));
  EXPECT_TRUE(refuses("mistral_gqa", {{big, 1}}, {spec, "key 'xxxx", "is not supported"}));
  EXPECT_TRUE(refuses("mistral_gqa", {{"hidden_size", big}}, {spec, "'hidden_size'", "integer"}));
  EXPECT_TRUE(refuses("mistral_gqa", {{"rms_norm_eps", big}}, {spec, "'rms_norm_eps'", "number"}));
  EXPECT_TRUE(refuses("mistral_gqa", {{"tie_word_embeddings", big}},
                      {spec, "'tie_word_embeddings'", "true or false"}));
  // gpt_neox and BERT read their string keys themselves.
  EXPECT_TRUE(refuses("neox_parallel", {{"hidden_act", big}}, {spec, "'hidden_act'", "gelu"}));
  EXPECT_TRUE(refuses("bert_mlm", {{"hidden_act", big}}, {spec, "hidden_act 'xxxx"}));
  EXPECT_TRUE(refuses("bert_mlm", {{"position_embedding_type", big}},
                      {spec, "position_embedding_type 'xxxx"}));
  EXPECT_TRUE(refuses("bert_mlm", {{"architectures", {big}}}, {spec, "architectures 'xxxx"}));
  EXPECT_TRUE(refuses("bert_cls", {{"problem_type", big}}, {spec, "problem_type 'xxxx"}));
}

std::string load_error(Model& m, const std::string& path) {
  try {
    load_model_weights(m, path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(loaded without error)";
}

TEST(BoundedQuotes, TensorAndShardNamesOfAModelFolder) {
  TempDir tmp;
  const std::string big = megabyte();
  Device dev{cpu_backend()};
  const ModelConfig cfg = resolve_model("gpt2-tiny");
  std::unique_ptr<Model> m = create_model(cfg, dev);
  m->init_weights(1);
  std::vector<std::pair<std::string, const Tensor*>> all;
  json map = json::object();
  for (const Parameter* p : m->parameters()) {
    all.emplace_back(p->name, &p->value);
    map[p->name] = "a.safetensors";
  }
  const Tensor& one = m->parameters()[0]->value;
  auto folder = [&](const std::string& name,
                    const std::vector<std::pair<std::string, const Tensor*>>& tensors,
                    const json& weight_map) {
    const fs::path dir = tmp.path(name);
    fs::create_directories(dir);
    save_safetensors((dir / "a.safetensors").string(), tensors);
    std::ofstream(dir / "model.safetensors.index.json")
        << json{{"metadata", json::object()}, {"weight_map", weight_map}}.dump();
    return dir.string();
  };

  // A shard name of a megabyte: refused in the index, not quoted whole where it is opened.
  json long_shard = map;
  long_shard[m->parameters()[0]->name] = std::string(1 << 20, 's') + ".safetensors";
  std::string dir = folder("long_shard", all, long_shard);
  EXPECT_TRUE(bounded_naming(load_error(*m, dir),
                             {"model.safetensors.index.json", "weight_map['", "(1048588 bytes)"}));

  // A tensor of a megabyte's name in a shard that the index does not map there.
  auto extra = all;
  extra.emplace_back(big, &one);
  dir = folder("unmapped", extra, map);
  EXPECT_TRUE(bounded_naming(load_error(*m, dir), {"a.safetensors", "tensor 'xxxx"}));

  // The index maps a megabyte's name to a shard without it.
  json ghost = map;
  ghost[big] = "a.safetensors";
  dir = folder("ghost", all, ghost);
  EXPECT_TRUE(bounded_naming(load_error(*m, dir), {"a.safetensors", "no tensor 'xxxx"}));

  // One file with tensors the model does not have, each name a megabyte.
  const std::string file = tmp.path("extra.safetensors");
  auto two = all;
  two.emplace_back(big, &one);
  two.emplace_back("y" + big, &one);
  save_safetensors(file, two);
  EXPECT_TRUE(bounded_naming(load_error(*m, file), {file, "2 tensor(s)", "'xxxx", "'yxxx"}));
}

}  // namespace models_bounded_quotes_test
}  // namespace
}  // namespace snug::test

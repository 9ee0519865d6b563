// Hugging Face model folders (models/hf_folder.h, and resolve_model's side of them): shard sizes
// and splits as transformers and huggingface_hub make them, a folder written and read back bit
// for bit (one file, shards with their index, bf16), its config.json, the tokenizer files it
// carries over, and one clear error per bad folder. Through the registry only: nothing here
// depends on the family but the model it picks (gpt2).
#include "models/hf_folder.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "io/json_input.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "support/param_bytes.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace hf_folder_test {

namespace fs = std::filesystem;
using test::read_json;
using test::TempDir;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string read_text(const std::string& path) {
  return read_input_file(path, path, int64_t{1} << 30);
}

// A small model with uneven sizes (vocab 301, C 48 over 6 heads, 3 layers) through the registry.
ModelConfig odd_model() {
  ModelShapeOverrides o;
  o.vocab_size = 301;
  o.n_positions = 40;
  o.n_embd = 48;
  o.n_layer = 3;
  o.n_head = 6;
  return resolve_model("gpt2-tiny", o);
}

TEST(HfFolder, ShardSizesParseAsTransformersReadsThem) {
  EXPECT_EQ(parse_shard_size("5GB", "--max-shard-size"), 5'000'000'000);
  EXPECT_EQ(parse_shard_size("500MB", "--max-shard-size"), 500'000'000);
  EXPECT_EQ(parse_shard_size("2GiB", "--max-shard-size"), int64_t{2} << 30);
  EXPECT_EQ(parse_shard_size("100kib", "--max-shard-size"), 102400);
  EXPECT_EQ(parse_shard_size("1.5KB", "--max-shard-size"), 1500);
  EXPECT_EQ(parse_shard_size("1000", "--max-shard-size"), 1000);
  EXPECT_EQ(parse_shard_size("64B", "--max-shard-size"), 64);
  for (const char* bad : {"", "GB", "5XB", "-1", "1e3", "5 GB", "1.2.3MB"})
    EXPECT_EQ(error_of([&] { parse_shard_size(bad, "--max-shard-size"); }),
              std::string("--max-shard-size '") + bad +
                  "': not a size (bytes, or a number with KB, MB, GB, TB, KiB, MiB, GiB or TiB, "
                  "e.g. 5GB, 500MB)")
        << bad;
  EXPECT_EQ(error_of([] { parse_shard_size("0", "--max-shard-size"); }),
            "--max-shard-size '0' is out of range (at least 1 byte)");
}

TEST(HfFolder, ShardsSplitAsHuggingfaceHubSplitsThem) {
  using V = std::vector<std::vector<size_t>>;
  EXPECT_EQ(plan_shards({4, 4, 4}, 100), (V{{0, 1, 2}}));
  EXPECT_EQ(plan_shards({4, 4, 4}, 8), (V{{0, 1}, {2}}));
  EXPECT_EQ(plan_shards({4, 4, 4}, 4), (V{{0}, {1}, {2}}));
  // A tensor beyond the limit gets a shard of its own, placed before the shard being filled
  // (huggingface_hub appends it at once and the current shard when it is full).
  EXPECT_EQ(plan_shards({4, 4, 10, 4, 4}, 8), (V{{2}, {0, 1}, {3, 4}}));
  EXPECT_EQ(plan_shards({}, 8), V{});
}

TEST(HfFolder, AFolderLoadsBackBitForBitWholeOrSharded) {
  TempDir tmp;
  Device cpu(cpu_backend());
  const ModelConfig cfg = odd_model();
  const auto src = create_model(cfg, cpu);
  src->init_weights(7);
  const std::string dir = tmp.path("model");

  // Shards of at most 20000 bytes: the 301 x 48 embedding (57792 bytes) alone, the rest packed.
  HfFolderOptions o;
  o.max_shard_bytes = 20000;
  HfFolderWritten w =
      save_hf_folder(dir, hf_config_json(cfg, DType::f32), hf_model_tensors(*src), "", o);
  ASSERT_GT(w.weight_files.size(), 2u);
  const size_t n = w.weight_files.size();
  std::vector<int64_t> bytes;
  int64_t total = 0, params = 0;
  for (const Parameter* p : src->parameters()) {
    bytes.push_back(p->value.nbytes());
    total += p->value.nbytes();
    params += p->numel();
  }
  EXPECT_EQ(plan_shards(bytes, 20000).size(), n);
  EXPECT_EQ(w.total_bytes, total);
  const nlohmann::json index = read_json(dir + "/model.safetensors.index.json");
  EXPECT_EQ(index["metadata"]["total_size"], total);
  EXPECT_EQ(index["metadata"]["total_parameters"], params);
  EXPECT_EQ(index["weight_map"].size(), src->parameters().size());
  EXPECT_EQ(n, 13u);  // wte alone, then 12 shards of the rest in order
  EXPECT_EQ(index["weight_map"]["transformer.wte.weight"], "model-00001-of-00013.safetensors");
  EXPECT_EQ(index["weight_map"]["transformer.ln_f.bias"], "model-00013-of-00013.safetensors");
  std::set<std::string> files;
  for (const auto& [name, file] : index["weight_map"].items()) {
    files.insert(file.get<std::string>());
    const SafetensorsFile f(dir + "/" + file.get<std::string>());
    EXPECT_EQ(f.info(name).dtype, "F32");
    EXPECT_EQ(f.metadata().at("format"), "pt");
  }
  EXPECT_EQ(files.size(), n);
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors"));

  const auto back = create_model(resolve_model(dir), cpu);
  back->init_weights(8);
  load_model_weights(*back, dir);
  EXPECT_EQ(test::param_bytes(*back), test::param_bytes(*src));

  // Saved again in one file: the shards and the index of the first save are gone.
  w = save_hf_folder(dir, hf_config_json(cfg, DType::f32), hf_model_tensors(*src), "", {});
  EXPECT_EQ(w.weight_files, std::vector<std::string>{"model.safetensors"});
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(dir)) left.insert(e.path().filename().string());
  EXPECT_EQ(left, (std::set<std::string>{"config.json", "model.safetensors"}));
  const auto again = create_model(resolve_model(dir), cpu);
  load_model_weights(*again, dir);
  EXPECT_EQ(test::param_bytes(*again), test::param_bytes(*src));
  // And sharded once more: model.safetensors goes, the index is back.
  w = save_hf_folder(dir, hf_config_json(cfg, DType::f32), hf_model_tensors(*src), "", o);
  EXPECT_EQ(w.weight_files.size(), 13u);
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors"));
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors.index.json"));
}

TEST(HfFolder, Bf16FolderHoldsTheRoundedValuesAndSaysSoInConfig) {
  TempDir tmp;
  Device cpu(cpu_backend());
  const ModelConfig cfg = odd_model();
  const auto src = create_model(cfg, cpu);
  src->init_weights(3);
  const std::string dir = tmp.path("bf16");
  HfFolderOptions o;
  o.dtype = DType::bf16;
  save_hf_folder(dir, hf_config_json(cfg, o.dtype), hf_model_tensors(*src), "", o);
  EXPECT_EQ(read_json(dir + "/config.json")["dtype"], "bfloat16");
  const SafetensorsFile f(dir + "/model.safetensors");
  // Every tensor BF16, each value fp32's rounded to nearest even.
  for (const Parameter* p : src->parameters()) {
    ASSERT_EQ(f.info(p->name).dtype, "BF16");
    const std::vector<float> got = f.read_f32(p->name);
    const float* want = p->value.data<float>();
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(f32_bits(got[i]), f32_bits(bf16_to_f32(f32_to_bf16(want[i])))) << p->name;
  }
  // Into a bf16 model (--bf16-full) it loads bit for bit, and saved from it again it is the same.
  const auto b = create_model(resolve_model(dir), cpu, DType::bf16);
  load_model_weights(*b, dir);
  const std::string dir2 = tmp.path("bf16-again");
  save_hf_folder(dir2, hf_config_json(cfg, o.dtype), hf_model_tensors(*b), "", o);
  EXPECT_EQ(read_text(dir + "/model.safetensors"), read_text(dir2 + "/model.safetensors"));
}

TEST(HfFolder, ConfigJsonKeepsTheSourceKeysUnderTheResolvedOnes) {
  TempDir tmp;
  const std::string dir = tmp.path("src");
  fs::create_directories(dir);
  write_text(dir + "/config.json",
             R"({"model_type": "gpt2", "vocab_size": 301, "n_positions": 40, "n_embd": 48,
                 "n_layer": 3, "n_head": 6, "bos_token_id": 7, "torch_dtype": "float16",
                 "architectures": ["Old"], "activation_function": "gelu_new"})");
  ModelShapeOverrides o;
  o.n_layer = 2;
  const ModelConfig cfg = resolve_model(dir, o);
  EXPECT_EQ(cfg.folder, dir);
  EXPECT_EQ(cfg.config_path, dir + "/config.json");
  EXPECT_EQ(cfg.shape.name, dir + " n_layer=2");
  const nlohmann::json j = hf_config_json(cfg, DType::f32);
  EXPECT_EQ(j["n_layer"], 2);  // resolved (the shape flag) over the file's 3
  EXPECT_EQ(j["bos_token_id"], 7);
  EXPECT_EQ(j["activation_function"], "gelu_new");
  EXPECT_EQ(j["architectures"], nlohmann::json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(j["dtype"], "float32");
  EXPECT_FALSE(j.contains("torch_dtype"));
  EXPECT_EQ(j["model_type"], "gpt2");
  // A preset has no source file: the resolved keys alone.
  const nlohmann::json p = hf_config_json(resolve_model("gpt2-tiny"), DType::bf16);
  EXPECT_EQ(p["dtype"], "bfloat16");
  EXPECT_FALSE(p.contains("bos_token_id"));
  // And what is written parses back to the same model.
  const std::string out = tmp.path("out");
  fs::create_directories(out);
  write_text(out + "/config.json", j.dump());
  EXPECT_EQ(resolve_model(out + "/config.json").hf, cfg.hf);
}

TEST(HfFolder, TokenizerAndGenerationFilesComeAlong) {
  TempDir tmp;
  Device cpu(cpu_backend());
  const std::string src = tmp.path("src");
  fs::create_directories(src);
  const ModelConfig cfg = resolve_model("gpt2-tiny");
  write_text(src + "/config.json", cfg.hf.dump());
  write_text(src + "/tokenizer.json", "{\"model\": {}}");
  write_text(src + "/tokenizer_config.json", "{\"model_max_length\": 128}");
  write_text(src + "/generation_config.json", "{\"bos_token_id\": 1}");
  write_text(src + "/README.md", "not copied");
  EXPECT_EQ(hf_side_files(src), (std::vector<std::string>{"tokenizer.json", "tokenizer_config.json",
                                                          "generation_config.json"}));
  const auto m = create_model(resolve_model(src + "/config.json"), cpu);
  m->init_weights(1);
  const std::string out = tmp.path("out");
  const HfFolderWritten w =
      save_hf_folder(out, hf_config_json(cfg, DType::f32), hf_model_tensors(*m), src, {});
  EXPECT_EQ(w.side_files, hf_side_files(src));
  for (const std::string& n : w.side_files)
    EXPECT_EQ(read_text(out + "/" + n), read_text(src + "/" + n));
  EXPECT_FALSE(fs::exists(out + "/README.md"));
  EXPECT_TRUE(hf_side_files("").empty());
}

TEST(HfFolder, BadFoldersAreNamed) {
  TempDir tmp;
  const std::string empty = tmp.path("empty");
  fs::create_directories(empty);
  EXPECT_EQ(error_of([&] { resolve_model(empty); }),
            "model folder " + empty +
                " has no config.json (a Hugging Face model folder holds config.json and "
                "model.safetensors or model.safetensors.index.json with its shards)");
  const std::string alien = tmp.path("alien");
  fs::create_directories(alien);
  write_text(alien + "/config.json", R"({"model_type": "alien", "hidden_size": 8})");
  EXPECT_EQ(
      error_of([&] {
        resolve_model(alien);
      }).rfind(alien + "/config.json: model_type 'alien' is not supported yet (supported: ", 0),
      0u)
      << error_of([&] { resolve_model(alien); });
  const std::string broken = tmp.path("broken");
  fs::create_directories(broken);
  write_text(broken + "/config.json", R"({"model_type": "gpt2", "n_embd": 8})");
  EXPECT_NE(error_of([&] { resolve_model(broken); }).find(broken + "/config.json: missing key"),
            std::string::npos);
  EXPECT_EQ(error_of([&] {
              resolve_model(tmp.path("nope"));
            }).rfind("unknown model '" + tmp.path("nope") + "': not a preset (", 0),
            0u);
  // Writing a folder where a file is.
  write_text(tmp.path("file"), "x");
  Device cpu(cpu_backend());
  const auto m = create_model(resolve_model("gpt2-tiny"), cpu);
  EXPECT_EQ(error_of([&] {
              save_hf_folder(tmp.path("file"), nlohmann::json::object(), hf_model_tensors(*m), "",
                             {});
            }),
            tmp.path("file") + ": exists and is not a folder (a model folder is written there)");
}

}  // namespace hf_folder_test
}  // namespace
}  // namespace snug

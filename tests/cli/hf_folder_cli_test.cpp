// `--model DIR` and the model folders snug writes (issue 17): a folder written by `snug
// export-init -o DIR` (sharded, with tokenizer files beside it) trains exactly as --init-from of
// the same weights; every checkpoint of the full fine-tune is a folder (config.json, tokenizer
// files, checksummed); `snug export --merge -o DIR` of that checkpoint holds its weights bit for
// bit and trains again with --model; precedence of --init-from over the folder's weights; a
// QLoRA run loads the folder quantized; and one clear message per mistake.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "io/json_input.h"
#include "io/safetensors.h"
#include "support/run_cli.h"

namespace snug::test {
namespace {
namespace hf_folder_cli_test {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const std::string kShape = " --seq-len 32 --per-device-train-batch-size 2 --learning-rate 1e-2";

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}
std::string read_text(const std::string& path) {
  return read_input_file(path, path, int64_t{1} << 30);
}

// Every tensor of a folder (one file or shards) as raw bytes with its dtype, by name.
std::map<std::string, std::pair<std::string, std::string>> tensors_of(const std::string& dir) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.size() < 12 || n.substr(n.size() - 12) != ".safetensors" || n.rfind("model", 0) != 0)
      continue;
    const SafetensorsFile f(e.path().string());
    for (const std::string& t : f.names()) {
      const std::vector<float> v = f.read_f32(t);
      out[t] = {f.info(t).dtype,
                std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float))};
    }
  }
  return out;
}

// A source folder: gpt2-tiny's weights from seed 5 in shards of at most 200 kB (gpt2-tiny is
// 3.4 MB in fp32), and the tokenizer files a Hub folder carries.
class HfFolderCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new TempDir();
    const CliResult r =
        run_snug("export-init --model gpt2-tiny --seed 5 --max-shard-size 200KB -o " + src());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    write_text(src() + "/tokenizer.json", "{\"version\": \"1.0\"}\n");
    write_text(src() + "/tokenizer_config.json", "{\"model_max_length\": 128}\n");
    write_text(src() + "/special_tokens_map.json", "{}\n");
    write_text(src() + "/generation_config.json", "{\"bos_token_id\": 0}\n");
  }
  static void TearDownTestSuite() { delete tmp_; }
  static std::string src() { return tmp_->path("src"); }
  static TempDir* tmp_;
};
TempDir* HfFolderCli::tmp_ = nullptr;

TEST_F(HfFolderCli, ExportInitWritesAShardedFolder) {
  const nlohmann::json index = read_json(src() + "/model.safetensors.index.json");
  EXPECT_GT(index["weight_map"].size(), 40u);
  const nlohmann::json cfg = read_json(src() + "/config.json");
  EXPECT_EQ(cfg["model_type"], "gpt2");
  EXPECT_EQ(cfg["architectures"], nlohmann::json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(cfg["dtype"], "float32");
  EXPECT_EQ(cfg["n_embd"], 128);
  EXPECT_FALSE(fs::exists(src() + "/model.safetensors"));
  EXPECT_TRUE(fs::exists(src() + "/model-00001-of-00018.safetensors"));
}

TEST_F(HfFolderCli, FolderTrainsAsInitFromItsWeightsAndCheckpointsAreFolders) {
  const std::string out = tmp_->path("run"), merged = tmp_->path("merged");
  const std::string flags = kShape + " --seed 9 --max-steps 2";
  const PlanAndTrain folder = plan_and_train(*tmp_, "--model " + src() + kShape + " --seed 9", "f");
  ASSERT_EQ(folder.train.exit_code, 0) << folder.train.err;
  ASSERT_EQ(folder.plan.exit_code, 0) << folder.plan.err;  // plan reads the folder's config
  const PlanAndTrain init =
      plan_and_train(*tmp_, "--model gpt2-tiny --init-from " + src() + kShape + " --seed 9", "i");
  ASSERT_EQ(init.train.exit_code, 0) << init.train.err;
  const PlanAndTrain seed = plan_and_train(*tmp_, "--model gpt2-tiny" + kShape + " --seed 9", "s");
  ASSERT_EQ(seed.train.exit_code, 0) << seed.train.err;
  EXPECT_EQ(folder.train_json["loss"], init.train_json["loss"]);
  EXPECT_NE(folder.train_json["loss"], seed.train_json["loss"]);
  EXPECT_EQ(folder.plan_json["memory"], init.plan_json["memory"]);

  // A full fine-tune's checkpoint: config.json and the tokenizer files, all checksummed.
  CliResult r = run_snug("train --model " + src() + flags + " --save-steps 2 --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string ck = out + "/checkpoint-2";
  EXPECT_EQ(read_json(ck + "/config.json"), read_json(src() + "/config.json"));
  const nlohmann::json files = read_json(ck + "/trainer_state.json")["files"];
  for (const char* n :
       {"config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
        "generation_config.json", "model.safetensors", "optimizer.safetensors"}) {
    EXPECT_TRUE(files.contains(n)) << n;
    EXPECT_TRUE(fs::exists(ck + "/" + n)) << n;
  }
  EXPECT_EQ(read_text(ck + "/tokenizer.json"), read_text(src() + "/tokenizer.json"));
  EXPECT_EQ(SafetensorsFile(ck + "/model.safetensors").metadata().at("format"), "pt");
  // The checkpoint loads as a model folder, and resumes.
  r = run_snug("train --model " + ck + flags);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_snug("train --model " + src() + kShape +
               " --seed 9 --max-steps 4 --save-steps 2 --output-dir " + out + " --resume-from " +
               out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("resuming"));

  // export --merge of a full fine-tune: the checkpoint's weights, bit for bit, as a folder.
  r = run_snug("export --merge --model " + src() + flags + " --checkpoint " + ck + " -o " + merged);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("as a Hugging Face model folder"));
  EXPECT_EQ(tensors_of(merged), tensors_of(ck));
  EXPECT_EQ(read_json(merged + "/config.json"), read_json(ck + "/config.json"));
  for (const char* n : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                        "generation_config.json"})
    EXPECT_EQ(read_text(merged + "/" + n), read_text(src() + "/" + n)) << n;
  r = run_snug("train --model " + merged + flags);
  EXPECT_EQ(r.exit_code, 0) << r.err;

  // A damaged config.json in a checkpoint stops the resume, naming it.
  write_text(ck + "/config.json", "{}");
  r = run_snug("train --model " + src() + kShape +
               " --seed 9 --max-steps 4 --save-steps 2 --output-dir " + out + " --resume-from " +
               ck);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(ck + "/config.json: "));
}

TEST_F(HfFolderCli, MergedLoraFolderShardedAndBf16) {
  // A LoRA run on the folder, merged into a bf16 folder in shards of at most 1 MB.
  const std::string out = tmp_->path("lora"), merged = tmp_->path("lora-merged");
  const std::string flags = "--model " + src() + kShape + " --seed 3 --lora-r 4 --max-steps 2";
  CliResult r = run_snug("train " + flags + " --save-steps 2 --output-dir " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // A LoRA checkpoint is not a model folder: no config.json.
  EXPECT_FALSE(fs::exists(out + "/checkpoint-2/config.json"));
  r = run_snug("export --merge " + flags + " --checkpoint " + out +
               " --dtype bf16 --max-shard-size 1MB -o " + merged);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("(4 LoRA modules merged)"));
  EXPECT_EQ(read_json(merged + "/config.json")["dtype"], "bfloat16");
  const nlohmann::json index = read_json(merged + "/model.safetensors.index.json");
  EXPECT_EQ(index["metadata"]["total_parameters"], 858880);  // gpt2-tiny's, without adapters
  EXPECT_EQ(index["metadata"]["total_size"], 2 * 858880);    // 2 bytes each
  // The same merge as one F32 file, rounded to bf16, equals the folder's tensors.
  r = run_snug("export --merge " + flags + " --checkpoint " + out + " -o " +
               tmp_->path("lora.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const SafetensorsFile one(tmp_->path("lora.safetensors"));
  const auto folder = tensors_of(merged);
  ASSERT_EQ(folder.size(), one.names().size());
  for (const std::string& n : one.names()) {
    std::vector<float> v = one.read_f32(n);
    for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
    EXPECT_EQ(folder.at(n).first, "BF16");
    EXPECT_EQ(folder.at(n).second,
              std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)))
        << n;
  }
}

TEST_F(HfFolderCli, InitFromWinsOverTheFolderAndConfigJsonStartsFromTheSeed) {
  const std::string file = tmp_->path("seed11.safetensors");
  CliResult r = run_snug("export-init --model gpt2-tiny --seed 11 -o " + file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const PlanAndTrain a =
      plan_and_train(*tmp_, "--model " + src() + " --init-from " + file + kShape, "p1");
  const PlanAndTrain b =
      plan_and_train(*tmp_, "--model gpt2-tiny --init-from " + file + kShape, "p2");
  ASSERT_EQ(a.train.exit_code, 0) << a.train.err;
  ASSERT_EQ(b.train.exit_code, 0) << b.train.err;
  EXPECT_EQ(a.train_json["loss"], b.train_json["loss"]);
  // config.json alone: initialized from --seed, as the preset it describes.
  const PlanAndTrain c = plan_and_train(*tmp_, "--model " + src() + "/config.json" + kShape, "p3");
  const PlanAndTrain d = plan_and_train(*tmp_, "--model gpt2-tiny" + kShape, "p4");
  ASSERT_EQ(c.train.exit_code, 0) << c.train.err;
  EXPECT_EQ(c.train_json["loss"], d.train_json["loss"]);
}

TEST_F(HfFolderCli, QuantizedRunsLoadTheFolderQuantized) {
  const PlanAndTrain q = plan_and_train(
      *tmp_, "--model " + src() + kShape + " --qlora --target-modules all-linear", "q");
  ASSERT_EQ(q.train.exit_code, 0) << q.train.err;
  ASSERT_EQ(q.plan.exit_code, 0) << q.plan.err;
  EXPECT_EQ(q.plan_json["memory"]["peak_bytes"], q.train_json["memory"]["peak_bytes"]);
}

TEST_F(HfFolderCli, MistakesAreNamed) {
  const std::string bare = tmp_->path("bare");
  fs::create_directories(bare);
  fs::copy_file(src() + "/config.json", bare + "/config.json");
  // A folder without weights (config.json, perhaps a tokenizer: a from-scratch run) starts from
  // --seed, as its config.json would, and says so.
  const PlanAndTrain b = plan_and_train(*tmp_, "--model " + bare + kShape, "bare");
  const PlanAndTrain p = plan_and_train(*tmp_, "--model gpt2-tiny" + kShape, "preset");
  ASSERT_EQ(b.train.exit_code, 0) << b.train.err;
  EXPECT_THAT(b.train.out, HasSubstr("snug: the model folder " + bare +
                                     " has no weights (model.safetensors or "
                                     "model.safetensors.index.json): initialized from --seed 42"));
  EXPECT_EQ(b.train_json["loss"], p.train_json["loss"]);
  // With --init-from the folder's config is enough, and the note is not printed.
  CliResult r = run_snug("train --max-steps 1 --model " + bare + " --init-from " + src() + kShape);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("has no weights")));
  const std::string empty = tmp_->path("empty");
  fs::create_directories(empty);
  r = run_snug("plan --model " + empty);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("model folder " + empty + " has no config.json"));
  r = run_snug("export-init --model gpt2-tiny --dtype bf16 -o " + tmp_->path("x.safetensors"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--dtype applies to a model folder (-o DIR), not to the file " +
                               tmp_->path("x.safetensors")));
  r = run_snug("export-init --model gpt2-tiny --dtype i8 -o " + tmp_->path("x"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--dtype 'i8': a model folder stores f32, bf16 or f16 tensors"));
  r = run_snug("export-init --model gpt2-tiny --max-shard-size 5XB -o " + tmp_->path("x"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--max-shard-size '5XB': not a size"));
  // A folder whose weights do not fit its config: the shard and the tensor are named.
  r = run_snug("train --max-steps 1 --model " + src() + " --n-layer 2" + kShape);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("transformer.h.2."));
}

}  // namespace hf_folder_cli_test
}  // namespace
}  // namespace snug::test

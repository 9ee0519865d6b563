// make_run_record: the record of a run from its arguments (train/run_record.h). Apart from the
// comparisons in run_record.cpp, which read only JSON (and so link into the trainer_state fuzz
// target without the rest of the engine).
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/fnv1a.h"
#include "io/safetensors_stamp.h"
#include "models/hf_folder.h"
#include "models/hf_weights.h"
#include "train/flag_table.h"
#include "train/model_setup.h"
#include "train/run_record.h"

namespace snug {

namespace {

// The data's checksum: the file's, or for a folder of jsonl files each file's bytes in name order
// (what a resume reads).
uint64_t data_checksum(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return fnv1a64_file(path);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(path, ec))
    if (e.is_regular_file() && e.path().extension() == ".jsonl") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  uint64_t h = fnv1a64("");
  for (const std::string& f : files) h = fnv1a64(std::to_string(fnv1a64_file(f)), h);
  return h;
}

// The safetensors files a weights path stands for (a file, or a folder's model.safetensors or the
// shards its index lists), in load order, each by its name, size and header hash
// (io/safetensors_stamp.h): what the record says of weights, without reading them.
nlohmann::json weight_shards(const std::string& path) {
  nlohmann::json shards = nlohmann::json::array();
  for (const std::string& f : hf_weight_files(path)) {
    const SafetensorsStamp s = safetensors_stamp(f);
    shards.push_back({{"name", std::filesystem::path(f).filename().string()},
                      {"size", s.size},
                      {"header_fnv1a64", hex64(s.header_fnv1a64)}});
  }
  return shards;
}

// The files of the --model folder that change what a run computes (issue 29, item 4):
// config.json (rms_norm_eps, rope_theta, ...), generation_config.json, the tokenizer's files
// (tokenizer.json's merges, tokenizer_config.json's chat template and special tokens), by content
// hash, and the weights, each shard by weight_shards (null for a folder without weights; kept
// whether or not --init-from replaces them, so that the record of a resume, which takes no
// --init-from, is the same). Under keys without dots (run_record.cpp reads dotted keys).
nlohmann::json model_files(const TrainingArguments& args, const ModelConfig& cfg,
                           const nlohmann::json& folder_weights) {
  namespace fs = std::filesystem;
  nlohmann::json files = nlohmann::json::object();
  std::error_code ec;
  auto add = [&](const char* key, const fs::path& p) {
    if (fs::is_regular_file(p, ec)) files[key] = hex64(fnv1a64_file(p.string()));
  };
  if (!cfg.config_path.empty()) add("config", cfg.config_path);
  if (!cfg.folder.empty())
    add("generation_config", fs::path(cfg.folder) / "generation_config.json");
  // The tokenizer: --tokenizer (a tokenizer.json or its folder), else the model folder's.
  fs::path tok = args.tokenizer.empty() ? fs::path(cfg.folder) : fs::path(args.tokenizer);
  if (!tok.empty() && fs::is_directory(tok, ec)) tok /= "tokenizer.json";
  if (!tok.empty()) {
    add("tokenizer", tok);
    add("tokenizer_config", tok.parent_path() / "tokenizer_config.json");
    add("special_tokens_map", tok.parent_path() / "special_tokens_map.json");
  }
  files["weights"] = folder_weights;
  return files;
}

}  // namespace

nlohmann::json make_run_record(const TrainingArguments& args) {
  const ModelConfig cfg = args.model_config();
  nlohmann::json r;
  r["model"] = {
      {"name", args.model},  // as given; the resolved shape follows
      {"n_layer", cfg.shape.n_layer},
      {"n_embd", cfg.shape.n_embd},
      {"n_head", cfg.shape.n_head},
      {"vocab_size", cfg.shape.vocab_size},
      {"n_positions", cfg.shape.n_positions},
      {"param_dtype", dtype_name(args.param_dtype())},
      {"lora_r", args.lora_r},
      {"lora_alpha", args.lora_r > 0 ? nlohmann::json(args.lora_alpha) : nullptr},
      {"target_modules",
       args.lora_r > 0 ? nlohmann::json(parse_target_modules(args.lora_targets())) : nullptr},
      {"use_rslora", args.lora_r > 0 && args.use_rslora},
      {"freeze", args.freeze}};
  const bool file = args.data != "builtin" && args.data != "dummy";
  r["data"] = {{"source", file ? "file" : args.data},
               {"fnv1a64", file ? nlohmann::json(hex64(data_checksum(args.data))) : nullptr}};
  const bool folder_weights = !cfg.folder.empty() && hf_folder_has_weights(cfg.folder);
  const nlohmann::json shards = folder_weights ? weight_shards(cfg.folder) : nlohmann::json();
  r["model_files"] = model_files(args, cfg, shards);
  r["seq_len"] = args.seq_len;
  r["optimizer"] = {{"name", args.optim}};
  for (const TrainingFlag& f : training_flags())  // the optimizer's settings
    if (f.optimizer_record) r["optimizer"][f.key] = f.value(args);
  const auto wq = args.weight_quant();
  r["quantized_base"] = wq ? nlohmann::json(wq->resolved().describe()) : nullptr;
  r["seed"] = args.seed;
  // The starting weights (train/model_setup.h): --init-from's file or folder, or the --model
  // folder's weights, each shard by weight_shards.
  const std::string weights = initial_weights_path(args, cfg);
  if (weights.empty()) {
    r["started_from"] = nullptr;
  } else {
    r["started_from"] = {
        {args.init_from.empty() ? "model_folder" : "init_from",
         std::filesystem::absolute(weights).string()},
        {"shards", args.init_from.empty() && folder_weights ? shards : weight_shards(weights)}};
  }
  return r;
}

}  // namespace snug

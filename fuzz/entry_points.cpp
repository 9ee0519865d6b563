#include "fuzz/entry_points.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "data/batches.h"
#include "data/dataset.h"
#include "data/sft_data.h"
#include "data/tokenizer_json.h"
#include "io/json_input.h"
#include "io/safetensors.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "peft/peft_adapter.h"
#include "train/run_record.h"
#include "train/trainer_state.h"

namespace snug::fuzz {

namespace {

// One in-memory file per process (memfd), rewritten for each input; its /proc/self/fd path is
// what the readers open, as they would open a user's file.
class ScratchFile {
 public:
  ScratchFile() : fd_(::memfd_create("snug-fuzz", MFD_CLOEXEC)) {
    SNUG_ASSERT(fd_ >= 0, "memfd_create failed");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  const std::string& hold(const uint8_t* data, size_t size) {
    SNUG_ASSERT(::ftruncate(fd_, 0) == 0, "ftruncate failed");
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      SNUG_ASSERT(n > 0, "pwrite failed");
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

ScratchFile& scratch() {
  static ScratchFile f;
  return f;
}

// A folder of this process's own (a PEFT adapter is a folder of two files), rewritten for each
// input and removed at exit.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "snug-fuzz-XXXXXX").string();
    SNUG_ASSERT(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  void write(const char* name, const uint8_t* data, size_t size) const {
    const std::string p = path_ + "/" + name;
    std::FILE* f = std::fopen(p.c_str(), "wb");
    SNUG_ASSERT(f != nullptr, "cannot write ", p);
    SNUG_ASSERT(size == 0 || std::fwrite(data, 1, size, f) == size, "cannot write ", p);
    std::fclose(f);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

void safetensors_file(const uint8_t* data, size_t size) {
  try {
    const SafetensorsFile f(scratch().hold(data, size));
    for (const std::string& name : f.names()) {
      const std::string& dtype = f.info(name).dtype;
      if (dtype == "F32" || dtype == "F16" || dtype == "BF16" || dtype == "F64")
        (void)f.read_f32(name);
      else if (dtype == "I32" || dtype == "I64")
        (void)f.read_i32(name);
    }
    (void)f.metadata();
  } catch (const Error&) {
  }
}

void model_config(const uint8_t* data, size_t size) {
  try {
    const ModelConfig c =
        parse_model_config(std::string_view(reinterpret_cast<const char*>(data), size), "f.json");
    (void)c.num_params;
  } catch (const Error&) {
  }
}

void token_file(const uint8_t* data, size_t size) {
  try {
    const auto src = open_dataset(scratch().hold(data, size), 50257, 0);
    std::vector<int32_t> buf(4096);
    for (int64_t i = 0; i < src->size(); i += static_cast<int64_t>(buf.size()))
      src->read(i, std::min<int64_t>(static_cast<int64_t>(buf.size()), src->size() - i),
                buf.data());
    (void)src->vocab_size();
  } catch (const Error&) {
  }
}

void trainer_state(const uint8_t* data, size_t size) {
  const std::string path = "fuzz/checkpoint-3/trainer_state.json";
  // What a resume does with the document before it touches a model: parse and check it, then
  // compare its run record and config with the run's (here: with themselves and with empty ones).
  auto resume_checks = [&](std::string_view text) {
    try {
      const TrainerState st = parse_trainer_state(text, path);
      check_same_run(st.run, st.run, path);
      (void)same_run(st.run, nlohmann::json::object());
      (void)config_changes(st.config, st.config);
      (void)config_changes(nlohmann::json::object(), st.config);
      check_same_run(st.run, nlohmann::json::object(), path);
    } catch (const Error&) {
    }
  };
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  resume_checks(text);
  // The checksum turns away almost every mutation at the door; re-signed, the same document
  // reaches the field and value checks behind it.
  nlohmann::json j;
  try {
    j = parse_json_input(text, path);
  } catch (const Error&) {
    return;
  }
  if (!j.is_object()) return;
  j["state_fnv1a64"] = trainer_state_checksum(j);
  resume_checks(j.dump());
}

void tokenizer_json(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::optional<JsonTokenizer> tok;
  try {
    tok.emplace(JsonTokenizer::parse(text, "tokenizer 'fuzz/tokenizer.json'"));
  } catch (const Error&) {
    return;
  }
  // An accepted file encodes and decodes text of every kind, and the bytes of the input itself
  // (refused when not UTF-8); every id it gives decodes.
  static const char* const kTexts[] = {
      "Hello  world\n\n  x's 12345 ,.<|endoftext|>",
      "\xec\x95\x88\xeb\x85\x95 \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9 e\xcc\x81\r\n\t  ",
      "[CLS] <s>a</s> \xe2\x96\x81\xe2\x96\x81<0x41> \xc4\xb0\xe4\xb8\xad\xe2\x80\x8b don't", ""};
  const auto round_trip = [&](std::string_view t) {
    for (const bool special : {true, false}) {
      try {
        const std::vector<int32_t> ids = tok->encode(t, special);
        (void)tok->decode(ids);
        (void)tok->decode(ids, /*skip_special=*/true);
        for (const int32_t id : ids) (void)tok->token(id);
      } catch (const Error&) {
      }
    }
  };
  for (const char* t : kTexts) round_trip(t);
  round_trip(text.substr(0, 4096));
  // The decoders on ids in any order (byte-fallback runs, WordPiece prefixes, Strip).
  std::vector<int32_t> ids;
  for (int64_t id = 0; id < std::min<int64_t>(tok->vocab_size(), 600); ++id)
    ids.push_back(static_cast<int32_t>((id * 7919) % tok->vocab_size()));
  (void)tok->decode(ids);
}

void jsonl_records(const uint8_t* data, size_t size) {
  // Bytes a, b, the byte-level space and <|im_start|>/<|im_end|>/<|endoftext|>: most text falls
  // outside this vocabulary and encodes to nothing, which the loader must survive too.
  static const char* const kTokenizer = R"({"version": "1.0", "truncation": null,
    "padding": null, "added_tokens": [
    {"id": 3, "content": "<|endoftext|>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true},
    {"id": 6, "content": "<|im_start|>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true},
    {"id": 7, "content": "<|im_end|>", "single_word": false, "lstrip": false,
     "rstrip": false, "normalized": false, "special": true}],
    "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false,
    "trim_offsets": true, "use_regex": true}, "post_processor": null, "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": null,
    "continuing_subword_prefix": null, "end_of_word_suffix": null, "fuse_unk": false,
    "byte_fallback": false, "ignore_merges": false,
    "vocab": {"a": 0, "b": 1, "ab": 2, "<|endoftext|>": 3, "Ġ": 4, "Ġab": 5},
    "merges": ["a b", "Ġ ab"]}})";
  // One tokenizer per known chat template (data/chat_template.h); the input's size picks which
  // renders it, so that every template's renderer and assistant spans are fuzzed.
  static std::vector<ModelTokenizer> toks = [] {
    std::vector<ModelTokenizer> v;
    for (const std::string& name : ChatTemplate::known_names()) {
      ModelTokenizer t(JsonTokenizer::parse(kTokenizer, "fuzz tokenizer"), "fuzz tokenizer");
      t.eos_token = "<|im_end|>";
      t.set_chat_template(ChatTemplate::by_name(name));
      v.push_back(std::move(t));
    }
    return v;
  }();
  const ModelTokenizer& tok = toks[size % toks.size()];
  const std::string& path = scratch().hold(data, size);
  for (const bool assistant_only : {false, true}) {
    SftOptions o;
    o.assistant_only_loss = assistant_only;
    try {
      const SftData d = load_sft_data(path, tok, o, 16);
      for (const bool packing : {false, true}) {
        ExampleBatching how;
        how.packing = packing;
        how.group_by_length = !packing;
        ExampleLoader loader(d.examples, 3, 16, 0, how);
        std::vector<int32_t> in(48), tg(48), pos(48);
        for (int64_t i = 0; i < loader.batches_per_epoch() + 1; ++i)
          loader.next_rows(3, in.data(), tg.data(), pos.data());
      }
    } catch (const Error&) {
    }
  }
}

bool adapter_folder(const uint8_t* data, size_t size) {
  if (size < 3) return false;
  static const ScratchDir dir;
  const size_t L = std::min<size_t>(size - 2, data[0] | static_cast<size_t>(data[1]) << 8);
  dir.write(kPeftConfigFile, data + 2, L);
  dir.write(kPeftWeightsFile, data + 2 + L, size - 2 - L);
  // One narrow layer keeps building the model cheap; llama's and gpt2's module names differ.
  static Device dev(cpu_backend());
  static const ModelConfig configs[] = {
      resolve_model("llama-tiny",
                    {.vocab_size = 16, .n_positions = 8, .n_embd = 8, .n_layer = 1, .n_head = 2}),
      resolve_model("gpt2-tiny",
                    {.vocab_size = 16, .n_positions = 8, .n_embd = 8, .n_layer = 1, .n_head = 2})};
  const ModelConfig& cfg = configs[(data[0] ^ data[1]) & 1];
  try {
    const PeftAdapterConfig a = read_peft_adapter_config(dir.path());
    TrainingArguments args;
    adopt_peft_adapter(args, a, [](const std::string&) { return false; });
    const std::unique_ptr<Model> model = create_model(cfg, dev);
    (void)load_peft_adapter(*model, args, a);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace snug::fuzz

// The llama, mistral, qwen2 and gpt_neox families (src/models/llama/, src/models/gpt_neox/):
//  - parameter counts and named_parameters() order (names and shapes) equal transformers' models
//    built from the same config.json on the meta device (tests/golden/
//    gen_decoder_families_golden.py), presets included (llama-7b is 6,738,415,616);
//  - the rope scalings snug implements give transformers' inverse frequencies;
//  - config.json parsing: transformers' defaults, Hub configs (v4 and v5 layouts) accepted, every
//    unsupported value refused with one error naming the file and the key;
//  - initialization statistics (normal(0, initializer_range), zero biases, unit norms) and
//    determinism; LoRA with Hugging Face module names.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/backends.h"
#include "models/llama/llama_config.h"
#include "models/registry.h"

namespace snug {
namespace {
namespace decoder_families_test {

using ::testing::HasSubstr;

const nlohmann::json& golden() {
  static const nlohmann::json j = [] {
    std::ifstream in(std::string(SNUG_TEST_DATA_DIR) + "/decoder_families_golden.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}

std::string config_text(const nlohmann::json& entry) {
  nlohmann::json c = entry["config"];
  c["model_type"] = entry["model_type"];
  return c.dump();
}

TEST(DecoderFamilies, ParameterCountsAndNamesEqualTransformers) {
  Device meta(meta_backend());
  int with_names = 0;
  for (const auto& [name, entry] : golden()["models"].items()) {
    SCOPED_TRACE(name);
    const ModelConfig cfg = parse_model_config(config_text(entry), name);
    EXPECT_EQ(cfg.shape.model_type, entry["model_type"]);
    EXPECT_EQ(cfg.num_params, entry["num_params"].get<int64_t>());
    if (!entry.contains("names")) continue;
    ++with_names;
    const auto model = create_model(cfg, meta);
    EXPECT_EQ(count_params(model->parameters()), cfg.num_params);
    const nlohmann::json& names = entry["names"];
    ASSERT_EQ(model->parameters().size(), names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      const Parameter& p = *model->parameters()[i];
      EXPECT_EQ(p.name, names[i][0]) << i;
      EXPECT_EQ(p.shape(), names[i][1].get<Shape>()) << p.name;
    }
  }
  EXPECT_EQ(with_names, 7);
}

TEST(DecoderFamilies, PresetsAreTheGoldenConfigs) {
  const std::vector<std::string> presets = {
      "llama-7b",   "llama-13b",    "llama-70b",  "mistral-7b",    "qwen2-0.5b",      "qwen2-7b",
      "llama-tiny", "mistral-tiny", "qwen2-tiny", "gpt-neox-tiny", "polyglot-ko-1.3b"};
  for (const std::string& p : presets) {
    SCOPED_TRACE(p);
    const ModelConfig c = resolve_model(p);
    const nlohmann::json& g = golden()["models"][p];
    EXPECT_EQ(c.shape.model_type, g["model_type"]);
    EXPECT_EQ(c.num_params, g["num_params"].get<int64_t>());
    for (const auto& [k, v] : g["config"].items()) EXPECT_EQ(c.hf[k], v) << k;
  }
  EXPECT_EQ(resolve_model("llama-7b").num_params, 6738415616);
  EXPECT_EQ(resolve_model("llama-2-70b").shape.name, "llama-70b");
  EXPECT_EQ(resolve_model("mistral-7b-v0.1").hf["sliding_window"], 4096);
  for (const char* tiny : {"llama-tiny", "mistral-tiny", "qwen2-tiny", "gpt-neox-tiny"})
    EXPECT_GE(resolve_model(tiny).shape.vocab_size, 256) << tiny;  // the byte-level data
}

TEST(DecoderFamilies, RopeScalingGivesTransformersInverseFrequencies) {
  for (const auto& [name, entry] : golden()["rope"].items()) {
    SCOPED_TRACE(name);
    const ModelConfig cfg = parse_model_config(entry["config"].dump(), name);
    const std::vector<float> inv = llama_config(cfg).rope_inv_freq();
    const std::vector<double> want = entry["inv_freq"];
    ASSERT_EQ(inv.size(), want.size());
    for (size_t j = 0; j < want.size(); ++j)
      EXPECT_NEAR(inv[j], want[j], 2e-7 * std::fabs(want[j])) << j;
  }
  // The same llama3 scaling in v4's layout (top-level rope_theta, rope_scaling with "type").
  nlohmann::json v4 = golden()["rope"]["llama3"]["config"];
  nlohmann::json s = v4["rope_parameters"];
  v4.erase("rope_parameters");
  v4["rope_theta"] = s["rope_theta"];
  s.erase("rope_theta");
  s.erase("rope_type");
  s["type"] = "llama3";
  v4["rope_scaling"] = s;
  const std::vector<float> a = llama_config(parse_model_config(v4.dump(), "v4")).rope_inv_freq();
  const std::vector<float> b =
      llama_config(parse_model_config(golden()["rope"]["llama3"]["config"].dump(), "v5"))
          .rope_inv_freq();
  EXPECT_EQ(a, b);
  // No scaling: the kernel's own 1/theta^(2j/R).
  EXPECT_TRUE(llama_config(resolve_model("llama-tiny")).rope_inv_freq().empty());
}

TEST(DecoderFamilies, MissingKeysTakeTransformersDefaults) {
  const ModelConfig l = parse_model_config(R"({"model_type": "llama"})", "l.json");
  EXPECT_EQ(l.shape.n_embd, 4096);
  EXPECT_EQ(l.shape.n_positions, 2048);
  EXPECT_EQ(l.num_params, 6738415616);                 // LlamaConfig() is the 7B shape
  EXPECT_TRUE(l.hf["num_key_value_heads"].is_null());  // derived: follows num_attention_heads
  EXPECT_EQ(l.hf["rms_norm_eps"], 1e-6);
  EXPECT_EQ(l.hf["rope_theta"], 10000.0);
  const ModelConfig m = parse_model_config(R"({"model_type": "mistral"})", "m.json");
  EXPECT_EQ(m.hf["num_key_value_heads"], 8);
  EXPECT_EQ(m.hf["sliding_window"], 4096);
  EXPECT_EQ(m.shape.n_positions, 131072);
  const ModelConfig q = parse_model_config(R"({"model_type": "qwen2"})", "q.json");
  EXPECT_EQ(q.shape.vocab_size, 151936);
  const ModelConfig n = parse_model_config(R"({"model_type": "gpt_neox"})", "n.json");
  EXPECT_EQ(n.shape.n_layer, 44);
  EXPECT_EQ(n.hf["rotary_pct"], 0.25);
  EXPECT_EQ(n.hf["use_parallel_residual"], true);
}

// Hub config.json files as shipped (v4 layout) and as transformers 5 writes them.
TEST(DecoderFamilies, HubConfigsAreAccepted) {
  const char* llama2 = R"({
    "_name_or_path": "meta-llama/Llama-2-7b-hf", "architectures": ["LlamaForCausalLM"],
    "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 11008, "max_position_embeddings": 4096,
    "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 32, "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_scaling": null,
    "tie_word_embeddings": false, "torch_dtype": "float16", "transformers_version": "4.31.0.dev0",
    "use_cache": true, "vocab_size": 32000})";
  EXPECT_EQ(parse_model_config(llama2, "llama2.json").num_params, 6738415616);
  const char* llama31 = R"({
    "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
    "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072,
    "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192, "rope_type": "llama3"},
    "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0", "use_cache": true, "vocab_size": 128256})";
  EXPECT_EQ(parse_model_config(llama31, "llama31.json").num_params, 8030261248);
  const char* polyglot = R"({
    "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 2,
    "hidden_act": "gelu", "hidden_size": 2048, "initializer_range": 0.02,
    "intermediate_size": 8192, "layer_norm_eps": 1e-05, "max_position_embeddings": 2048,
    "model_type": "gpt_neox", "num_attention_heads": 16, "num_hidden_layers": 24,
    "rotary_emb_base": 10000, "rotary_pct": 0.5, "tie_word_embeddings": false,
    "torch_dtype": "float16", "transformers_version": "4.21.0.dev0", "use_cache": true,
    "use_parallel_residual": true, "vocab_size": 30080})";
  EXPECT_EQ(parse_model_config(polyglot, "polyglot.json").num_params, 1331810304);
  const char* qwen = R"({
    "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
    "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 896, "initializer_range": 0.02,
    "intermediate_size": 4864, "max_position_embeddings": 131072, "max_window_layers": 24,
    "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
    "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "sliding_window": 131072, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
    "transformers_version": "4.40.1", "use_cache": true, "use_sliding_window": false,
    "vocab_size": 151936})";
  EXPECT_EQ(parse_model_config(qwen, "qwen.json").num_params, 494032768);
  // transformers 5's to_dict() of GPTNeoXConfig() and Qwen2Config() (layer_types, the label
  // maps, rope_parameters).
  const char* neox5 = R"({"_name_or_path": "", "architectures": null, "attention_bias": true,
    "attention_dropout": 0.0, "bos_token_id": 0, "chunk_size_feed_forward": 0,
    "classifier_dropout": 0.1, "dtype": null, "eos_token_id": 2, "hidden_act": "gelu",
    "hidden_dropout": 0.0, "hidden_size": 6144, "id2label": {"0": "LABEL_0", "1": "LABEL_1"},
    "initializer_range": 0.02, "intermediate_size": 24576, "is_decoder": false,
    "is_encoder_decoder": false, "label2id": {"LABEL_0": 0, "LABEL_1": 1},
    "layer_norm_eps": 1e-05, "max_position_embeddings": 2048, "model_type": "gpt_neox",
    "num_attention_heads": 64, "num_hidden_layers": 44, "output_attentions": false,
    "output_hidden_states": false, "pad_token_id": null, "problem_type": null, "return_dict": true,
    "rope_parameters": {"partial_rotary_factor": 0.25, "rope_theta": 10000.0,
                        "rope_type": "default"}, "tie_word_embeddings": false,
    "transformers_version": "5.24.0", "use_cache": true, "use_parallel_residual": true,
    "vocab_size": 50432})";
  const ModelConfig n5 = parse_model_config(neox5, "neox5.json");
  EXPECT_EQ(n5.num_params, parse_model_config(R"({"model_type": "gpt_neox"})", "d").num_params);
  nlohmann::json q5 = nlohmann::json::parse(R"({"model_type": "qwen2", "num_hidden_layers": 2,
    "layer_types": ["full_attention", "full_attention"], "max_window_layers": 28,
    "sliding_window": null, "use_sliding_window": false,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}})");
  EXPECT_EQ(parse_model_config(q5.dump(), "q5.json").shape.n_layer, 2);
}

struct Refusal {
  const char* type;
  const char* edit;  // merged into the family's tiny preset
  std::vector<std::string> says;
};

TEST(DecoderFamilies, UnsupportedValuesAreRefusedNamingTheKey) {
  const std::vector<Refusal> cases = {
      {"llama",
       R"({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}})",
       {"config.json key 'rope_scaling'", "'yarn'", "not implement"}},
      {"llama",
       R"({"rope_scaling": {"type": "dynamic", "factor": 2.0}})",
       {"'rope_scaling'", "'dynamic'"}},
      {"llama",
       R"({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}})",
       {"'rope_scaling'", "needs 'low_freq_factor'"}},
      {"llama",
       R"({"rope_scaling": {"rope_type": "linear", "factor": 2.0, "beta_fast": 3}})",
       {"'rope_scaling'", "'beta_fast'"}},
      {"llama",
       R"({"rope_parameters": {"rope_type": "default"}, "rope_theta": 5.0})",
       {"'rope_theta'", "beside 'rope_parameters'"}},
      {"llama", R"({"hidden_act": "gelu"})", {"'hidden_act'", "'gelu'", "silu"}},
      {"llama",
       R"({"attention_dropout": 0.1})",
       {"'attention_dropout'", "dropout is not implemented for llama"}},
      {"llama", R"({"num_key_value_heads": 3})", {"'num_key_value_heads'", "does not divide"}},
      {"llama", R"({"partial_rotary_factor": 0.3})", {"'partial_rotary_factor'", "even"}},
      {"llama",
       R"({"hidden_size": 132, "num_attention_heads": 12})",
       {"'num_attention_heads'", "11 rotary dims", "even"}},
      {"llama",
       R"({"quantization_config": {"quant_method": "gptq"}})",
       {"'quantization_config'", "not supported for llama"}},
      {"llama", R"({"vocab_size": 0})", {"'vocab_size'", "must be positive"}},
      {"llama", R"({"rms_norm_eps": "small"})", {"'rms_norm_eps'", "must be a number"}},
      {"mistral", R"({"sliding_window": -1})", {"'sliding_window'", "positive or null"}},
      {"mistral", R"({"attention_bias": true})", {"'attention_bias'", "not supported for mistral"}},
      {"qwen2",
       R"({"use_sliding_window": true})",
       {"'use_sliding_window'", "no sliding-window attention"}},
      {"qwen2",
       R"({"num_hidden_layers": 2, "layer_types": ["full_attention", "sliding_attention"]})",
       {"'layer_types'", "sliding_attention"}},
      {"gpt_neox",
       R"({"rope_scaling": {"type": "linear", "factor": 2.0}})",
       {"'rope_scaling'", "not implemented for gpt_neox"}},
      {"gpt_neox",
       R"({"hidden_dropout": 0.1})",
       {"'hidden_dropout'", "dropout is not implemented for gpt_neox"}},
      {"gpt_neox", R"({"attention_dropout": 0.1})", {"'attention_dropout'"}},
      {"gpt_neox", R"({"hidden_act": "relu"})", {"'hidden_act'", "'relu'"}},
      {"gpt_neox", R"({"rotary_pct": 0.1})", {"'rotary_pct'", "even"}},
      {"gpt_neox", R"({"num_attention_heads": 3})", {"'num_attention_heads'", "does not divide"}},
      {"gpt_neox",
       R"({"rope_parameters": {"rope_type": "default", "rope_theta": 1e4},
                       "rotary_pct": 0.5})",
       {"'rotary_pct'", "beside 'rope_parameters'"}},
      {"gpt_neox", R"({"some_new_key": 1})", {"'some_new_key'", "not supported for gpt_neox"}},
  };
  for (const Refusal& c : cases) {
    SCOPED_TRACE(std::string(c.type) + " " + c.edit);
    const std::string tiny =
        std::string(c.type) == "gpt_neox" ? "gpt-neox-tiny" : std::string(c.type) + "-tiny";
    nlohmann::json j = resolve_model(tiny).hf;
    j.merge_patch(nlohmann::json::parse(c.edit));
    try {
      parse_model_config(j.dump(), "dir/config.json");
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_THAT(msg, HasSubstr("dir/config.json: "));
      for (const std::string& s : c.says) EXPECT_THAT(msg, HasSubstr(s));
    }
  }
}

TEST(DecoderFamilies, ShapeFlagsAndOverridesSetTheFamilysKeys) {
  ModelShapeOverrides o;
  o.n_layer = 2;
  o.n_embd = 256;
  o.n_head = 8;
  const ModelConfig l = resolve_model("llama-tiny", o);
  EXPECT_EQ(l.hf["num_hidden_layers"], 2);
  EXPECT_EQ(l.hf["hidden_size"], 256);
  EXPECT_EQ(l.hf["num_attention_heads"], 8);
  EXPECT_EQ(l.hf["num_key_value_heads"], 2);  // given by the preset
  const ModelConfig n = resolve_model("gpt-neox-tiny", o, {"rotary_pct=0.5"});
  EXPECT_EQ(n.hf["num_hidden_layers"], 2);
  EXPECT_EQ(n.hf["rotary_pct"], 0.5);
  const ModelConfig t = resolve_model("llama-tiny", {}, {"rope_theta=500000"});
  EXPECT_EQ(t.hf["rope_theta"], 500000);
  EXPECT_THROW(resolve_model("qwen2-tiny", {}, {"use_sliding_window=true"}), Error);
}

double mean_of(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return s / static_cast<double>(v.size());
}

double std_of(const std::vector<float>& v) {
  const double m = mean_of(v);
  double s = 0;
  for (float x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

std::vector<float> values(const Model& m, const Parameter& p) {
  std::vector<float> v(static_cast<size_t>(p.numel()));
  m.read_values(p, v.data());
  return v;
}

TEST(DecoderFamilies, InitIsTransformersInitWeights) {
  Device cpu(cpu_backend());
  for (const char* preset : {"llama-tiny", "qwen2-tiny", "gpt-neox-tiny"}) {
    SCOPED_TRACE(preset);
    // initializer_range 0.05, to see that it is read.
    const ModelConfig cfg = resolve_model(preset, {}, {"initializer_range=0.05"});
    const auto model = create_model(cfg, cpu);
    model->init_weights(7);
    int normals = 0;
    for (const Parameter* p : model->parameters()) {
      const std::vector<float> v = values(*model, *p);
      const std::string& n = p->name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".bias") {
        for (float x : v) ASSERT_EQ(x, 0.0f) << n;
      } else if (n.find("norm") != std::string::npos) {
        for (float x : v) ASSERT_EQ(x, 1.0f) << n;
      } else {
        ++normals;
        ASSERT_GE(v.size(), 4096u) << n;
        EXPECT_NEAR(mean_of(v), 0.0, 0.004) << n;
        EXPECT_NEAR(std_of(v), 0.05, 0.003) << n;
      }
    }
    EXPECT_GE(normals, 4 * 4 + 1);
    const auto again = create_model(cfg, cpu);
    again->init_weights(7);
    const auto other = create_model(cfg, cpu);
    other->init_weights(8);
    for (size_t i = 0; i < model->parameters().size(); ++i) {
      const Parameter& p = *model->parameters()[i];
      EXPECT_EQ(values(*model, p), values(*again, *again->parameters()[i])) << p.name;
      if (p.name.find("proj.weight") != std::string::npos) {
        EXPECT_NE(values(*model, p), values(*other, *other->parameters()[i])) << p.name;
      }
    }
  }
}

LoraConfig lora(const std::vector<std::string>& targets) {
  LoraConfig c;
  c.r = 4;
  c.alpha = 8;
  c.target_modules = targets;
  return c;
}

TEST(DecoderFamilies, LoraTakesHuggingFaceModuleNames) {
  Device meta(meta_backend());
  struct Case {
    const char* preset;
    std::vector<std::string> targets;
    size_t adapters;
    const char* first;
  };
  const std::vector<Case> cases = {
      {"llama-tiny", {"q_proj", "v_proj"}, 8, "model.layers.0.self_attn.q_proj"},
      {"llama-tiny", {"all-linear"}, 28, "model.layers.0.self_attn.q_proj"},
      {"mistral-tiny", {"q_proj", "v_proj"}, 8, "model.layers.0.self_attn.q_proj"},
      {"qwen2-tiny", {"gate_proj"}, 4, "model.layers.0.mlp.gate_proj"},
      {"qwen2-tiny", {"all-linear"}, 28, "model.layers.0.self_attn.q_proj"},
      {"gpt-neox-tiny", {"query_key_value"}, 4, "gpt_neox.layers.0.attention.query_key_value"},
      {"gpt-neox-tiny", {"all-linear"}, 16, "gpt_neox.layers.0.attention.query_key_value"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.preset) + " " + c.targets[0]);
    const auto model = create_model(resolve_model(c.preset), meta);
    model->add_lora(lora(c.targets), 1);
    ASSERT_EQ(model->lora_adapters().size(), c.adapters);
    EXPECT_EQ(model->lora_adapters()[0].module, c.first);
    EXPECT_EQ(model->lora_adapters()[0].A->name, std::string(c.first) + ".lora_A.weight");
    for (const Parameter* p : model->parameters())
      EXPECT_EQ(p->requires_grad, p->name.find(".lora_") != std::string::npos) << p->name;
  }
  // query_key_value: B has the fused 3H rows, in the interleaved order of the base weight.
  const auto neox = create_model(resolve_model("gpt-neox-tiny"), meta);
  neox->add_lora(lora({"query_key_value"}), 1);
  EXPECT_EQ(neox->lora_adapters()[0].B->shape(), (Shape{384, 4}));
  const auto l = create_model(resolve_model("llama-tiny"), meta);
  try {
    l->add_lora(lora({"c_attn"}), 1);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("q_proj"));
  }
}

TEST(DecoderFamilies, DefaultLoraTargetsArePeftsPerModelType) {
  EXPECT_STREQ(architecture("gpt2").default_lora_targets, "c_attn");
  EXPECT_STREQ(architecture("llama").default_lora_targets, "q_proj,v_proj");
  EXPECT_STREQ(architecture("mistral").default_lora_targets, "q_proj,v_proj");
  EXPECT_STREQ(architecture("qwen2").default_lora_targets, "q_proj,v_proj");
  EXPECT_STREQ(architecture("gpt_neox").default_lora_targets, "query_key_value");
}

}  // namespace decoder_families_test
}  // namespace
}  // namespace snug

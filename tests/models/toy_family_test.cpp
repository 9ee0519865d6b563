// A decoder family defined in a test, as a new family is anywhere (models/family.h): a config
// reader and a spec, registered with one line. Through the registry only, it trains one step and
// its weights round-trip bit for bit through a Hugging Face folder; nothing in src/ names it.
//
// The toy: pre-LayerNorm layers without biases, rotary on the whole head, a GELU (tanh) MLP, the
// head tied to the token embedding (Llama's names).
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/device.h"
#include "kernels/backends.h"
#include "models/config_reader.h"
#include "models/family.h"
#include "models/hf_folder.h"
#include "models/registry.h"
#include "optim/optimizer.h"
#include "support/param_bytes.h"
#include "support/random.h"
#include "support/run_cli.h"

namespace snug {
namespace {
namespace toy_family_test {

struct ToyConfig {
  std::string name;
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0;
  int64_t num_hidden_layers = 0, num_attention_heads = 0, max_position_embeddings = 0;
  bool tie_word_embeddings = true;
  double initializer_range = 0.02;
  nlohmann::json hf;

  // V*H (tied embedding) + L * (2 LayerNorms 4H + q, k, v, o 4 H^2 + MLP 2 H I) + final 2H.
  int64_t num_params() const {
    const int64_t H = hidden_size, I = intermediate_size;
    return vocab_size * H + num_hidden_layers * (4 * H + 4 * H * H + 2 * H * I) + 2 * H;
  }
};

// The config reader.
ToyConfig read_toy(const nlohmann::json& j, const std::string& spec, const std::string& name) {
  ConfigReader r(j, spec, "toy");
  ToyConfig c;
  c.name = name;
  c.vocab_size = r.integer("vocab_size", 64);
  c.hidden_size = r.integer("hidden_size", 16);
  c.intermediate_size = r.integer("intermediate_size", 24);
  c.num_hidden_layers = r.integer("num_hidden_layers", 2);
  c.num_attention_heads = r.integer("num_attention_heads", 2);
  c.max_position_embeddings = r.integer("max_position_embeddings", 32);
  c.initializer_range = r.number("initializer_range", 0.05);
  r.finish();
  c.hf = r.resolved();
  c.hf["model_type"] = "toy";
  r.dimensions({{"vocab_size", c.vocab_size},
                {"hidden_size", c.hidden_size},
                {"intermediate_size", c.intermediate_size},
                {"num_hidden_layers", c.num_hidden_layers},
                {"num_attention_heads", c.num_attention_heads},
                {"max_position_embeddings", c.max_position_embeddings}});
  return c;
}

ModelConfig parse_toy(const nlohmann::json& j, const std::string& spec, const std::string& name) {
  const ToyConfig c = read_toy(j, spec, name);
  return common_shape_config(c, "toy", c.hf);
}

// The spec.
DecoderLMSpec toy_spec(const ModelConfig& cfg) {
  const ToyConfig c = read_toy(cfg.hf, cfg.shape.name, cfg.shape.name);
  const int64_t head_dim = c.hidden_size / c.num_attention_heads;
  return common_spec(c, {.norm = nn::NormKind::layer,
                         .norm_eps = 1e-5f,
                         .attn = {.hidden = c.hidden_size,
                                  .num_heads = c.num_attention_heads,
                                  .rotary_dim = head_dim,
                                  .fused_qkv_name = ""},
                         .mlp = {.hidden = c.hidden_size,
                                 .intermediate = c.intermediate_size,
                                 .act = nn::Activation::gelu_tanh}});
}

// One block keeps about ten (s, b, h) tensors; a rough count is all a test family needs.
int64_t toy_activation_bytes(const ModelConfig& cfg, int64_t s, int64_t b, int64_t e, bool) {
  return 10 * s * b * cfg.shape.n_embd * e;
}

const Architecture kToy{.model_type = "toy",
                        .parse = parse_toy,
                        .create = create_decoder<toy_spec>,
                        .flops_per_token = decoder_flops<toy_spec>,
                        .layer_activation_bytes = toy_activation_bytes,
                        .default_lora_targets = "q_proj,v_proj"};

TEST(ToyFamily, RegisteredWithOneLineItTrainsAStepAndRoundTripsThroughAnHfFolder) {
  const ScopedArchitecture registered(kToy);  // the one line

  test::TempDir tmp;
  const ModelConfig cfg = parse_model_config(R"({"model_type": "toy", "vocab_size": 50})", "toy");
  EXPECT_EQ(cfg.shape.model_type, "toy");
  EXPECT_EQ(cfg.shape.n_layer, 2);
  EXPECT_EQ(cfg.num_params, 50 * 16 + 2 * (4 * 16 + 4 * 16 * 16 + 2 * 16 * 24) + 2 * 16);
  // Forward FLOPs from the spec: q, k, v, o and a two-matrix MLP per layer, the head, attention.
  EXPECT_EQ(architecture("toy").flops_per_token(cfg, 8).forward(),
            2.0 * 2 * (4 * 16 * 16 + 2 * 16 * 24) + 2.0 * 50 * 16 + 2.0 * 2 * 8 * 16);

  Device cpu(cpu_backend());
  const auto model = create_model(cfg, cpu);
  EXPECT_EQ(count_params(model->parameters()), cfg.num_params);
  EXPECT_EQ(model->parameters().front()->name, "model.embed_tokens.weight");
  model->init_weights(3);

  // One training step: AdamW on the gradients of a batch lowers the loss on that batch.
  const int64_t B = 2, T = 8;
  const std::vector<int32_t> tokens = test::random_ints(B * T, 5, 0, 49);
  const std::vector<int32_t> targets = test::random_ints(B * T, 6, 0, 49);
  const float before = model->forward(tokens.data(), targets.data(), B, T);
  model->backward();
  for (const Parameter* p : model->parameters()) EXPECT_TRUE(p->grad.defined()) << p->name;
  const auto opt = make_optimizer(optimizer_names().front(), model->parameters(), {});
  opt->step(1e-2f);
  model->zero_grad();
  const float after = model->forward(tokens.data(), targets.data(), B, T, false);
  EXPECT_LT(after, before);

  // The trained weights through a Hugging Face folder, back through the registry.
  const std::string dir = tmp.path("toy-folder");
  save_hf_folder(dir, hf_config_json(cfg, DType::f32), hf_model_tensors(*model), "", {});
  const ModelConfig again = resolve_model(dir);
  EXPECT_EQ(again.shape.model_type, "toy");
  EXPECT_EQ(again.num_params, cfg.num_params);
  EXPECT_EQ(again.hf["vocab_size"], 50);
  const auto back = create_model(again, cpu);
  load_model_weights(*back, dir);
  EXPECT_EQ(test::param_bytes(*back), test::param_bytes(*model));
  const float reloaded = back->forward(tokens.data(), targets.data(), B, T, false);
  EXPECT_EQ(reloaded, after);
}

TEST(ToyFamily, RegistrationEndsWithItsScopeAndRefusesATakenType) {
  {
    const ScopedArchitecture registered(kToy);
    EXPECT_EQ(architecture("toy").model_type, std::string("toy"));
    Architecture gpt2 = kToy;
    gpt2.model_type = "gpt2";
    EXPECT_THROW(register_architecture(gpt2), Error);
  }
  EXPECT_THROW(architecture("toy"), Error);
}

}  // namespace toy_family_test
}  // namespace
}  // namespace snug

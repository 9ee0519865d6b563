// GPT-2 expressed as a composition of src/nn blocks (Conv1D layout with a fused [q|k|v]
// projection and biases, LayerNorm, GELU tanh, learned positions, head tied to wte, GPT-2's
// names and parameter order) gives the loss and every gradient of snug's GPT2 class bit for
// bit: the blocks call the same kernels in the same order, which is what moving GPT-2 onto the
// blocks (a later step of issue 16) will rely on.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/device.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "support/block_lm.h"
#include "support/configs.h"

namespace snug {
namespace {
namespace gpt2_from_blocks_test {

test::BlockLMSpec gpt2_style(const GPT2Config& c, AttentionImpl kernel) {
  test::BlockLMSpec s;
  s.vocab = c.vocab_size;
  s.hidden = c.n_embd;
  s.layers = c.n_layer;
  s.embed_name = "transformer.wte.weight";
  s.positions_name = "transformer.wpe.weight";
  s.max_positions = c.n_positions;
  s.layer_prefix = "transformer.h.";
  s.final_norm_name = "transformer.ln_f";
  s.tie_word_embeddings = true;
  nn::DecoderLayerConfig& l = s.layer;
  l.norm = nn::NormKind::layer;
  l.norm_eps = c.layer_norm_epsilon;
  l.order = nn::LayerParamOrder::interleaved;
  l.norm1_name = "ln_1";
  l.norm2_name = "ln_2";
  l.attn_name = "attn";
  l.attn.hidden = c.n_embd;
  l.attn.num_heads = c.n_head;
  l.attn.qkv_bias = l.attn.o_bias = true;
  l.attn.kernel = kernel;
  l.attn.layout = nn::LinearLayout::conv1d;
  l.attn.fused_qkv_name = "c_attn";
  l.attn.o_name = "c_proj";
  l.mlp.hidden = c.n_embd;
  l.mlp.intermediate = 4 * c.n_embd;
  l.mlp.act = nn::Activation::gelu_tanh;
  l.mlp.bias = true;
  l.mlp.layout = nn::LinearLayout::conv1d;
  l.mlp.up_name = "c_fc";
  l.mlp.down_name = "c_proj";
  return s;
}

TEST(Gpt2FromBlocks, SameLossAndGradientsBitForBit) {
  const GPT2Config cfg = test::odd_config();
  const int64_t B = 2, T = 37;  // T > 32 and < 64: a ragged naive row block, one flash tile
  std::vector<int32_t> tokens, targets;
  for (int64_t i = 0; i < B * T; ++i) {
    tokens.push_back(static_cast<int32_t>((37 * i + 5) % cfg.vocab_size));
    targets.push_back(i % 11 == 3 ? -100 : static_cast<int32_t>((53 * i + 2) % cfg.vocab_size));
  }
  for (AttentionImpl kernel : {AttentionImpl::flash, AttentionImpl::naive}) {
    Device dev(cpu_backend());
    GPT2 gpt2(cfg, dev);
    gpt2.init_weights(7);
    gpt2.set_attention(kernel);
    test::BlockLM blocks(gpt2_style(cfg, kernel), dev);
    const ParameterList& want = gpt2.parameters();
    const ParameterList& got = blocks.params().list();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(got[i]->name, want[i]->name);
      ASSERT_EQ(got[i]->shape(), want[i]->shape()) << want[i]->name;
      std::memcpy(got[i]->value.data<float>(), want[i]->value.data<float>(),
                  static_cast<size_t>(want[i]->value.nbytes()));
    }
    const float loss = gpt2.forward(tokens.data(), targets.data(), B, T);
    gpt2.backward();
    const double block_loss = blocks.forward(tokens.data(), targets.data(), B, T, true);
    blocks.backward();
    EXPECT_EQ(static_cast<float>(block_loss), loss);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(got[i]->grad.defined()) << want[i]->name;
      EXPECT_EQ(std::memcmp(got[i]->grad.data<float>(), want[i]->grad.data<float>(),
                            static_cast<size_t>(want[i]->grad.nbytes())),
                0)
          << want[i]->name << " differs";
    }
  }
}

}  // namespace gpt2_from_blocks_test
}  // namespace
}  // namespace snug

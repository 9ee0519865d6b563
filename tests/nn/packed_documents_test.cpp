// Packed sequences through composed models (nn/attention.h, RunContext::position_ids): a batch
// whose rows pack several documents, with position ids restarting at 0 at each document, gives
// the loss and gradients of the documents run alone (rotary by each document's own positions,
// attention only within a document), for a Llama-style (GQA, full rotary) and a GPT-NeoX-style
// (partial rotary, interleaved fused projection) composition, flash and naive, fast and ref
// tables; the packed run's gradients pass finite differences; its meta run equals its cpu run to
// the byte; bad position ids are refused with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/backends.h"
#include "kernels/op_table.h"
#include "support/block_lm.h"
#include "support/block_lm_checks.h"

namespace snug {
namespace {
namespace packed_documents_test {

using test::BlockBatch;
using test::BlockLM;
using test::BlockLMConfig;
using test::BlockLMSpec;

BlockLMConfig llama_like(AttentionImpl kernel) {
  BlockLMConfig c = test::llama_like();
  c.kernel = kernel;
  return c;
}

BlockLMSpec neox_like(AttentionImpl kernel) {
  BlockLMConfig c = llama_like(kernel);
  c.heads = c.kv_heads = 2;
  c.rotary_dim = 2;
  c.norm = nn::NormKind::layer;
  c.act = nn::Activation::gelu_erf;
  c.parallel_residual = true;
  return test::neox_style(c);
}

// Documents: token and target ids of each, and how they are packed into rows of T.
struct Doc {
  std::vector<int32_t> tokens, targets;
};
Doc doc(int64_t len, int64_t V, int seed) {
  Doc d;
  for (int64_t i = 0; i < len; ++i) {
    d.tokens.push_back(static_cast<int32_t>((seed * 7 + 3 * i + 1) % V));
    d.targets.push_back(static_cast<int32_t>((seed * 5 + 2 * i + 4) % V));
  }
  return d;
}

// Row 0 packs documents a (3 tokens) and b (4), row 1 holds c (7) alone: T = 7.
struct Packed {
  std::vector<Doc> docs;
  BlockBatch batch;
};
Packed packed(int64_t V) {
  Packed p;
  p.docs = {doc(3, V, 1), doc(4, V, 2), doc(7, V, 3)};
  p.batch.B = 2;
  p.batch.T = 7;
  for (const Doc& d : p.docs) {
    p.batch.tokens.insert(p.batch.tokens.end(), d.tokens.begin(), d.tokens.end());
    p.batch.targets.insert(p.batch.targets.end(), d.targets.begin(), d.targets.end());
    for (size_t i = 0; i < d.tokens.size(); ++i)
      p.batch.positions.push_back(static_cast<int32_t>(i));
  }
  return p;
}

TEST(PackedDocuments, PackedBatchGivesTheDocumentsRunAlone) {
  for (AttentionImpl kernel : {AttentionImpl::flash, AttentionImpl::naive})
    for (const BlockLMSpec& spec : {test::llama_style(llama_like(kernel)), neox_like(kernel)})
      for (const OpTable* table : {&ref_op_table(), &fast_op_table()}) {
        const std::string what = spec.embed_name +
                                 (kernel == AttentionImpl::flash ? " flash " : " naive ") +
                                 table->impl;
        Device dev(cpu_backend(), table);
        BlockLM m(spec, dev);
        test::init_weights(m, 7);
        const Packed p = packed(spec.vocab);
        // The mean loss over all targets is the documents' mean losses weighted by their
        // lengths, and so are the gradients.
        double want_loss = 0.0;
        std::vector<std::vector<double>> want_grads;
        for (Parameter* q : m.params().list())
          want_grads.emplace_back(static_cast<size_t>(q->numel()), 0.0);
        const double n = static_cast<double>(p.batch.tokens.size());
        for (const Doc& d : p.docs) {
          const int64_t len = static_cast<int64_t>(d.tokens.size());
          want_loss += m.forward(d.tokens.data(), d.targets.data(), 1, len, true) * len / n;
          m.backward();
          for (size_t i = 0; i < want_grads.size(); ++i) {
            const Parameter* q = m.params().list()[i];
            for (int64_t j = 0; j < q->numel(); ++j)
              want_grads[i][static_cast<size_t>(j)] += q->grad.data<float>()[j] * len / n;
          }
          m.params().zero_grad();
        }
        const double loss = m.forward(p.batch.tokens.data(), p.batch.targets.data(), p.batch.B,
                                      p.batch.T, true, p.batch.pos());
        EXPECT_NEAR(loss, want_loss, 1e-6 * want_loss) << what;
        m.backward();
        for (size_t i = 0; i < want_grads.size(); ++i) {
          const Parameter* q = m.params().list()[i];
          double scale = 0.0;
          for (double g : want_grads[i]) scale = std::max(scale, std::abs(g));
          for (int64_t j = 0; j < q->numel(); ++j)
            ASSERT_NEAR(q->grad.data<float>()[j], want_grads[i][static_cast<size_t>(j)],
                        2e-5 * scale + 1e-8)
                << what << " " << q->name << "[" << j << "]";
        }
        // Without position ids the documents of row 0 see each other: the loss differs.
        EXPECT_GT(std::abs(m.forward(p.batch.tokens.data(), p.batch.targets.data(), p.batch.B,
                                     p.batch.T, false) -
                           loss),
                  1e-4)
            << what;
      }
}

TEST(PackedDocuments, GradientsMatchFiniteDifferences) {
  const BlockLMSpec llama = test::llama_style(llama_like(AttentionImpl::flash));
  test::check_gradients(llama, 11, packed(llama.vocab).batch);
  const BlockLMSpec neox = neox_like(AttentionImpl::naive);
  test::check_gradients(neox, 12, packed(neox.vocab).batch);
}

TEST(PackedDocuments, MetaRunEqualsCpuRunToTheByte) {
  for (const BlockLMSpec& spec :
       {test::llama_style(llama_like(AttentionImpl::flash)), neox_like(AttentionImpl::naive)}) {
    // The position ids are input data, and do not outlive backward.
    const MemoryStats c = test::expect_meta_equals_cpu(spec, packed(spec.vocab).batch, 4);
    EXPECT_GT(c.max_by_category[static_cast<int>(Category::input_data)], 0);
  }
}

TEST(PackedDocuments, BadPositionIdsAreRefusedOnBothDevices) {
  const BlockLMSpec spec = test::llama_style(llama_like(AttentionImpl::flash));
  Packed p = packed(spec.vocab);
  p.batch.positions[5] = 7;  // row 0, t = 5: neither 0 nor 2
  for (const Backend* kind : {&cpu_backend(), &meta_backend()}) {
    Device dev(*kind);
    BlockLM m(spec, dev);
    try {
      m.forward(p.batch.tokens.data(), p.batch.targets.data(), p.batch.B, p.batch.T, false,
                p.batch.pos());
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("position id 7 at batch 0, row 5"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace packed_documents_test
}  // namespace
}  // namespace snug

// Training on examples (data/batches.h) and evaluation (train/trainer.h): packed rows train
// exactly as the same documents padded one per row (position ids keep them apart), a model with
// learned positions refuses --packing by name, eval_loss is the Trainer's row-weighted mean of
// batch losses, and --load-best-model-at-end loads the checkpoint with the lowest eval_loss.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "core/device.h"
#include "core/error.h"
#include "data/batches.h"
#include "kernels/backends.h"
#include "models/gpt2/gpt2.h"
#include "nn/init.h"
#include "nn/param_fill.h"
#include "report/report.h"
#include "support/block_decoder.h"
#include "support/block_lm.h"
#include "support/configs.h"
#include "support/random.h"
#include "train/trainer.h"

namespace snug {
namespace {
namespace sft_train_test {

// A Llama-shaped DecoderLM (rotary positions: it takes position ids).
DecoderLMSpec rotary_spec() {
  test::BlockLMConfig c{
      .vocab = 32, .hidden = 8, .layers = 2, .heads = 2, .kv_heads = 1, .intermediate = 12};
  c.rope_theta = 100.0f;
  return test::decoder_spec(test::llama_style(c), "tiny-rotary", 16);
}
const ModelSummary kRotarySummary = {"tiny-rotary", "llama", 2, 8, 2, 32, 16};

// `steps` steps on rows of 16 tokens, 2 per batch, evaluated every 2 steps on the eval data.
TrainingArguments evaluated_run(int64_t steps) {
  TrainingArguments a = test::args_of({.seq_len = 16, .batch = 2});
  a.max_steps = steps;
  a.eval_data = "x";
  a.eval_steps = 2;
  return a;
}

// gpt2-tiny with one layer.
GPT2Config one_layer_tiny() {
  GPT2Config c = resolve_gpt2("gpt2-tiny");
  c.n_layer = 1;
  return c;
}

Example example(std::vector<int32_t> ids, int masked) {
  Example e;
  e.labels = ids;
  for (int i = 0; i < masked; ++i) e.labels[static_cast<size_t>(i)] = kIgnoreIndex;
  e.ids = std::move(ids);
  return e;
}

std::vector<float> grads(const Model& m) {
  std::vector<float> g;
  for (Parameter* p : m.parameters())
    if (p->grad.defined())
      g.insert(g.end(), p->grad.data<float>(), p->grad.data<float>() + p->grad.numel());
  return g;
}

// Loss and gradients of one window of `data` (rows of at most T = 8).
std::pair<double, std::vector<float>> one_window(const TrainData& data, int64_t B) {
  Device dev(cpu_backend());
  test::BlockDecoderLM model(rotary_spec(), dev, kRotarySummary);
  model.init_weights(3);
  const int64_t T = 8;
  auto src = data.batches(B, T, 0, false);
  std::vector<int32_t> in(static_cast<size_t>(B * T)), tg(in.size()), pos(in.size());
  const int64_t cols = src->next_rows(B, in.data(), tg.data(), pos.data());
  int64_t valid = 0;
  for (int64_t i = 0; i < B * cols; ++i) valid += tg[static_cast<size_t>(i)] >= 0;
  const double loss =
      accumulate_gradients(model, in.data(), tg.data(), src->has_positions() ? pos.data() : nullptr,
                           {cols}, B, T, valid);
  return {loss, grads(model)};
}

TEST(Packing, PackedRowTrainsAsTheDocumentsPaddedApart) {
  const std::vector<Example> ex = {example({3, 9, 4, 17, 8}, 1), example({5, 6, 21}, 0)};
  ExampleBatching padded, packed;
  packed.packing = true;
  const ExampleData apart(ex, "apart", padded), together(ex, "together", packed);
  const auto [l1, g1] = one_window(apart, 2);     // two rows, padded to 5
  const auto [l2, g2] = one_window(together, 1);  // one row of 8 with both documents
  EXPECT_NEAR(l1, l2, 1e-6);
  ASSERT_EQ(g1.size(), g2.size());
  for (size_t i = 0; i < g1.size(); ++i) EXPECT_NEAR(g1[i], g2[i], 1e-6) << i;
  // Without the position ids the second document would attend to the first: another loss.
  Device dev(cpu_backend());
  test::BlockDecoderLM model(rotary_spec(), dev, kRotarySummary);
  model.init_weights(3);
  auto src = together.batches(1, 8, 0, false);
  std::vector<int32_t> in(8), tg(8), pos(8);
  src->next_rows(1, in.data(), tg.data(), pos.data());
  const double crossing = model.forward(in.data(), tg.data(), 1, 8, false);
  EXPECT_GT(std::abs(crossing - l2), 1e-4);
}

TEST(Packing, ModelWithLearnedPositionsRefusesItByName) {
  Device dev(cpu_backend());
  GPT2 model(one_layer_tiny(), dev);
  ExampleBatching packed;
  packed.packing = true;
  const ExampleData data({example({1, 2, 3}, 0)}, "x", packed);
  TrainingArguments a;
  a.max_steps = 1;
  a.seq_len = 8;
  try {
    Trainer t(a, model, &data, nullptr);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--packing: gpt2-tiny has learned positions "
                                         "(transformer.wpe.weight)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Evaluate, RowWeightedMeanOfBatchLossesAsTheTrainer) {
  Device dev(cpu_backend());
  GPT2 model(one_layer_tiny(), dev);
  model.init_weights(5);
  // 3 windows of T = 8 (25 tokens): batches of 2 and 1 rows.
  const InMemoryTokenSource src(test::random_ints(25, 9, 0, 255));
  const TokenStreamData data(std::shared_ptr<const TokenSource>(&src, [](const TokenSource*) {}));
  const EvalLog e = evaluate(model, data, 2, 8, 0);
  std::vector<int32_t> tok(25);
  src.read(0, 25, tok.data());
  auto rows = [&](int64_t first, int64_t n) {
    std::vector<int32_t> in, tg;
    for (int64_t w = first; w < first + n; ++w)
      for (int64_t t = 0; t < 8; ++t) {
        in.push_back(tok[static_cast<size_t>(w * 8 + t)]);
        tg.push_back(tok[static_cast<size_t>(w * 8 + t + 1)]);
      }
    const double l = model.forward(in.data(), tg.data(), n, 8, false);
    model.free_activations();
    return l;
  };
  const double expected = (2 * rows(0, 2) + 1 * rows(2, 1)) / 3;
  EXPECT_NEAR(e.eval_loss, expected, 1e-6);
  EXPECT_DOUBLE_EQ(e.perplexity, std::exp(e.eval_loss));
  EXPECT_EQ(e.samples, 3);
}

TEST(Evaluate, EveryEvalStepsAndAtTheEndIntoTheReport) {
  Device dev(cpu_backend());
  GPT2 model(one_layer_tiny(), dev);
  model.init_weights(5);
  const auto train = std::make_shared<InMemoryTokenSource>(test::random_ints(400, 1, 0, 255));
  const TokenStreamData data(train);
  const TokenStreamData eval(
      std::make_shared<InMemoryTokenSource>(test::random_ints(60, 2, 0, 255)));
  TrainingArguments a = evaluated_run(5);
  a.per_device_eval_batch_size = 3;
  Trainer t(a, model, &data, &eval);
  const TrainResult r = t.train();
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.evals.size(), 3u);  // steps 2, 4 and the end (5)
  EXPECT_EQ(r.evals[0].step, 2);
  EXPECT_EQ(r.evals[1].step, 4);
  EXPECT_EQ(r.evals[2].step, 5);
  EXPECT_NEAR(r.evals[2].eval_loss, evaluate(model, eval, 3, 16, 0).eval_loss, 1e-9);
  const nlohmann::json j = make_report(a, model, r, dev.pool().stats(), std::nullopt);
  EXPECT_EQ(j["eval_loss"].get<double>(), r.evals[2].eval_loss);
  EXPECT_EQ(j["perplexity"].get<double>(), std::exp(r.evals[2].eval_loss));
  EXPECT_EQ(j["eval_history"].size(), 3u);
  EXPECT_EQ(j["eval_history"][0]["step"], 2);
}

TEST(Evaluate, LoadBestModelAtEndLoadsTheLowestEvalLossCheckpoint) {
  const std::string out =
      (std::filesystem::temp_directory_path() / ("snug_best_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(out);
  Device dev(cpu_backend());
  GPT2 model(one_layer_tiny(), dev);
  model.init_weights(5);
  const TokenStreamData data(
      std::make_shared<InMemoryTokenSource>(test::random_ints(400, 1, 0, 255)));
  const TokenStreamData eval(
      std::make_shared<InMemoryTokenSource>(test::random_ints(60, 2, 0, 255)));
  TrainingArguments a = evaluated_run(6);
  a.learning_rate = 0.05;  // large enough that the loss on unseen random tokens rises
  a.save_steps = 2;
  a.save_total_limit = 1;
  a.output_dir = out;
  a.load_best_model_at_end = true;
  Trainer t(a, model, &data, &eval);
  const TrainResult r = t.train();
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.evals.size(), 3u);
  size_t best = 0;
  for (size_t i = 1; i < r.evals.size(); ++i)
    if (r.evals[i].eval_loss < r.evals[best].eval_loss) best = i;
  EXPECT_EQ(r.best_metric, r.evals[best].eval_loss);
  EXPECT_EQ(std::filesystem::path(r.best_model_checkpoint).filename(),
            "checkpoint-" + std::to_string(r.evals[best].step));
  EXPECT_TRUE(std::filesystem::exists(r.best_model_checkpoint));  // kept by the rotation
  // The model now holds the best checkpoint's weights: its eval_loss again.
  EXPECT_NEAR(evaluate(model, eval, 8, 16, 0).eval_loss, r.best_metric, 1e-9);
  std::filesystem::remove_all(out);
}

TEST(Evaluate, FlagsThatCannotWorkAreRefusedByName) {
  auto msg = [](TrainingArguments a) {
    try {
      a.validate();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  TrainingArguments a;
  a.eval_steps = 5;
  EXPECT_EQ(msg(a), "--eval-steps needs evaluation data: --eval-data or --eval-split");
  a.eval_split = 1.5;
  EXPECT_EQ(msg(a), "--eval-split 1.5 is out of range: --eval-split takes a number in [0, 1)");
  a.eval_split = 0.1;
  a.eval_data = "x";
  EXPECT_EQ(msg(a), "--eval-split and --eval-data are exclusive: give one");
  a.eval_data = "";
  a.per_device_eval_batch_size = 0;
  EXPECT_EQ(msg(a),
            "--per-device-eval-batch-size 0 is out of range: --per-device-eval-batch-size takes an "
            "integer in [1, 2147483647]");
  a.per_device_eval_batch_size = 8;
  a.metric_for_best_model = "f1";
  EXPECT_NE(msg(a).find("--metric-for-best-model f1: snug evaluates eval_loss, and "
                        "eval_accuracy for --task sequence-classification"),
            std::string::npos);
  a.metric_for_best_model = "accuracy";  // the task decides (the Trainer checks it)
  EXPECT_EQ(msg(a), "");
  a.metric_for_best_model = "loss";
  a.load_best_model_at_end = true;
  a.save_steps = 3;
  EXPECT_EQ(msg(a),
            "--load-best-model-at-end requires --save-steps (3) to be a round multiple of "
            "--eval-steps (5)");
  a.save_steps = 10;
  EXPECT_EQ(msg(a), "");
  a.eval_steps = 0;
  EXPECT_NE(msg(a).find("--load-best-model-at-end needs evaluations"), std::string::npos);
}

}  // namespace sft_train_test
}  // namespace
}  // namespace snug

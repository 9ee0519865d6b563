#include "train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"

namespace snug {

EvalLog evaluate(Model& model, const TrainData& data, int64_t B, int64_t T, uint64_t seed,
                 const EvalOptions& options) {
  const std::unique_ptr<BatchSource> src = data.batches(B, T, seed, false);
  const int64_t items = src->items_per_epoch();
  std::vector<int32_t> in(static_cast<size_t>(B * T)), tg(in.size());
  std::vector<int32_t> pos(src->has_positions() ? in.size() : 0);
  double weighted = 0.0;
  int64_t rows_with_targets = 0, done = 0, correct = 0, labelled = 0;
  std::set<std::pair<int64_t, int64_t>> shapes;
  const bool skip = options.skip_repeated_shapes && model.device().is_meta();
  const int world = options.comm != nullptr ? options.comm->size() : 1;
  const int rank = options.comm != nullptr ? options.comm->rank() : 0;
  int64_t batch = 0;  // batches dealt so far (every rank deals them all)
  for (; done < items; ++batch) {
    const int64_t rows = std::min(B, items - done);
    if (batch % world != rank) {  // another rank's batch: passed over
      src->next_rows(rows, nullptr, nullptr, nullptr);
      done += rows;
      continue;
    }
    const int64_t cols =
        src->next_rows(rows, in.data(), tg.data(), pos.empty() ? nullptr : pos.data());
    if (options.prepare) options.prepare(in.data(), tg.data(), rows, cols, done);
    if (skip && !shapes.insert({rows, cols}).second) {
      if (std::any_of(tg.begin(), tg.begin() + rows * cols, [](int32_t t) { return t >= 0; }))
        rows_with_targets += rows;
      done += rows;
      continue;
    }
    if (!pos.empty())
      model.set_position_ids({pos.begin(), pos.begin() + static_cast<std::ptrdiff_t>(rows * cols)});
    const float loss = model.forward(in.data(), tg.data(), rows, cols, false);
    if (options.accuracy && !model.device().is_meta()) {  // meta has no logits to read
      // (rows, labels): softmax keeps the order of the logits, so either gives the argmax.
      const Tensor& out = model.logits();
      SNUG_ASSERT(out.shape().size() == 2 && out.shape()[0] == rows && out.dtype() == DType::f32,
                  "accuracy needs (rows, labels) fp32 outputs, got ", shape_str(out.shape()));
      const int64_t labels = out.shape()[1];
      // (rows, labels) floats, read on the host.
      std::vector<float> logits(static_cast<size_t>(rows * labels));
      model.device().download(logits.data(), out.data<float>(), rows * labels);
      const float* p = logits.data();
      for (int64_t b = 0; b < rows; ++b) {
        const int32_t label = tg[static_cast<size_t>(b * cols)];
        if (label < 0) continue;
        const float* row = p + b * labels;
        correct += std::max_element(row, row + labels) - row == label ? 1 : 0;
        ++labelled;
      }
    }
    model.free_activations();
    if (model.last_valid_targets() > 0) {
      weighted += static_cast<double>(loss) * static_cast<double>(rows);
      rows_with_targets += rows;
    }
    done += rows;
  }
  if (options.same_forwards && world > 1) {
    // `batch` batches were dealt round-robin: rank 0 has the most, ceil(batch / world).
    const int64_t rounds = (batch + world - 1) / world;
    const int64_t mine = batch / world + (rank < batch % world ? 1 : 0);
    for (int64_t i = mine; i < rounds; ++i) {
      const int32_t token = 0, none = -100;
      if (!pos.empty()) model.set_position_ids({0});
      model.forward(&token, &none, 1, 1, false);
      SNUG_ASSERT(model.last_valid_targets() == 0, "a blank evaluation forward has no target");
      model.free_activations();
    }
  }
  if (!pos.empty()) model.set_position_ids({});
  if (world > 1) {
    options.comm->all_reduce_sum(&weighted, 1);
    int64_t counts[] = {rows_with_targets, correct, labelled};
    options.comm->all_reduce_sum(counts, 3);
    rows_with_targets = counts[0];
    correct = counts[1];
    labelled = counts[2];
  }
  SNUG_CHECK(rows_with_targets > 0, "evaluation data ", data.describe(),
             " has no token to evaluate");
  EvalLog e{};
  e.eval_loss = weighted / static_cast<double>(rows_with_targets);
  e.perplexity = std::exp(e.eval_loss);
  e.samples = done;
  if (options.accuracy && labelled > 0)
    e.accuracy = static_cast<double>(correct) / static_cast<double>(labelled);
  return e;
}

}  // namespace snug

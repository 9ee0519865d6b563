#include "support/train_run.h"

#include "models/registry.h"

namespace snug::test {

TrainRun::TrainRun(const TrainingArguments& a, const Backend& kind, const OpTable* ops)
    : args(a),
      dev(kind, ops),
      cfg(a.model_config()),
      model(create_model(cfg, dev, a.param_dtype(), a.weight_quant())),
      data(open_data(a.data_options(cfg.shape.vocab_size))) {
  model->init_weights(a.seed);
}

TrainResult TrainRun::train() {
  Trainer t(args, *model, data.train.get(), data.eval.get());
  return t.train();
}

}  // namespace snug::test

#include "support/gpt2_train.h"

namespace snug::test {

Gpt2Train::Gpt2Train(const Backend& kind, const GPT2Config& cfg, const TrainingArguments& a,
                     uint64_t init_seed, const std::function<void(GPT2&)>& before)
    : dev(kind), model(cfg, dev, a.param_dtype()) {
  model.init_weights(init_seed);
  if (before) before(model);
  data = open_dataset(a.data, cfg.vocab_size, a.seed);
  trainer = std::make_unique<Trainer>(a, model, data.get());
  result = trainer->train();
}

}  // namespace snug::test

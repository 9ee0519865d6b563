#include "support/gpt2_train.h"

namespace snug::test {

namespace {
Device& set_up(Device& dev, const std::function<void(Device&)>& setup) {
  if (setup) setup(dev);
  return dev;
}
}  // namespace

Gpt2Train::Gpt2Train(const Backend& kind, const GPT2Config& cfg, const TrainingArguments& a,
                     uint64_t init_seed, const std::function<void(GPT2&)>& before,
                     const std::function<void(Device&)>& setup)
    : dev(kind), model(cfg, set_up(dev, setup), a.param_dtype()) {
  model.init_weights(init_seed);
  if (before) before(model);
  data = open_dataset(a.data, cfg.vocab_size, a.seed);
  trainer = std::make_unique<Trainer>(a, model, data.get());
  result = trainer->train();
}

}  // namespace snug::test

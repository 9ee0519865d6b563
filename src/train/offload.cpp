#include "train/offload.h"

#include <memory>

#include "core/device.h"
#include "core/error.h"
#include "train/training_args.h"

namespace snug {

bool offloads_optimizer(const TrainingArguments& args) {
  return args.offload_optimizer == "cpu";
}

Device* offload_host(Device& dev, const TrainingArguments& args) {
  if (!offloads_optimizer(args)) return nullptr;
  SNUG_CHECK(dev.host_addressable(), "--offload-optimizer cpu with --device ", dev.name(),
             ": the update on the host would need the gradients downloaded and the weights "
             "uploaded every step, which is not built yet; drop the flag, or use --device cpu");
  if (&dev.host() == &dev) dev.own_host(std::make_unique<Device>(dev.backend()));
  return &dev.host();
}

}  // namespace snug

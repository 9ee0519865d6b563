#include "train/offload.h"

#include <memory>

#include "core/device.h"
#include "core/error.h"
#include "train/training_args.h"

namespace snug {

bool offloads_optimizer(const TrainingArguments& args) {
  return args.offload_optimizer == "cpu";
}

namespace {

// dev's host pool, attached first when dev is its own host; `why` ends the refusal of a device
// the host does not address.
Device* attach_host(Device& dev, const char* flag, const char* why) {
  SNUG_CHECK(dev.host_addressable(), flag, " cpu with --device ", dev.name(), ": ", why,
             ", which is not built yet; drop the flag, or use --device cpu");
  if (&dev.host() == &dev) dev.own_host(std::make_unique<Device>(dev.backend()));
  return &dev.host();
}

}  // namespace

Device* offload_host(Device& dev, const TrainingArguments& args) {
  if (!offloads_optimizer(args)) return nullptr;
  return attach_host(dev, "--offload-optimizer",
                     "the update on the host would need the gradients downloaded and the weights "
                     "uploaded every step");
}

bool offloads_parameters(const TrainingArguments& args) {
  return args.offload_param == "cpu";
}

Device* offload_param_host(Device& dev, const TrainingArguments& args) {
  if (!offloads_parameters(args)) return nullptr;
  return attach_host(dev, "--offload-param",
                     "each block's gather would upload the shards from the host and the update "
                     "would write them there every step");
}

}  // namespace snug

#include "train/offload.h"

#include <memory>
#include <string>

#include "core/device.h"
#include "core/error.h"
#include "kernels/backends.h"
#include "train/training_args.h"

namespace snug {

bool offloads_optimizer(const TrainingArguments& args) {
  return args.offload_optimizer == "cpu";
}

namespace {

// Why `flag` cpu cannot run on the device a run computes on (on meta, the one a plan is for:
// `--device cuda` plans replay on meta), "" when it can; `why` says what is missing.
std::string refusal(const Device& dev, const TrainingArguments& args, const char* flag,
                    const char* why) {
  const bool planned_gpu = dev.is_meta() && cuda_index(args.kernels_device()).has_value();
  if (dev.host_addressable() && !planned_gpu) return "";
  return detail::concat(flag, " cpu with --device ",
                        planned_gpu ? args.kernels_device() : std::string(dev.name()), ": ", why,
                        ", which is not built yet; drop the flag, or use --device cpu");
}

constexpr const char* kOptimizerWhy =
    "the update on the host would need the gradients downloaded and the weights uploaded every "
    "step";
constexpr const char* kParamWhy =
    "each block's gather would upload the shards from the host and the update would write them "
    "there every step";

// dev's host pool, attached first when dev is its own host. Refused on a device the host does
// not address; a plan for one (meta) goes on, and says it is a plan only (offload_unbuilt).
Device* attach_host(Device& dev, const TrainingArguments& args, const char* flag, const char* why) {
  const std::string refused = refusal(dev, args, flag, why);
  SNUG_CHECK(refused.empty() || dev.is_meta(), refused);
  if (&dev.host() == &dev) dev.own_host(std::make_unique<Device>(dev.backend()));
  return &dev.host();
}

}  // namespace

Device* offload_host(Device& dev, const TrainingArguments& args) {
  if (!offloads_optimizer(args)) return nullptr;
  return attach_host(dev, args, "--offload-optimizer", kOptimizerWhy);
}

bool offloads_parameters(const TrainingArguments& args) {
  return args.offload_param == "cpu";
}

Device* offload_param_host(Device& dev, const TrainingArguments& args) {
  if (!offloads_parameters(args)) return nullptr;
  return attach_host(dev, args, "--offload-param", kParamWhy);
}

std::string offload_unbuilt(const Device& dev, const TrainingArguments& args) {
  if (offloads_optimizer(args)) {
    std::string r = refusal(dev, args, "--offload-optimizer", kOptimizerWhy);
    if (!r.empty()) return r;
  }
  return offloads_parameters(args) ? refusal(dev, args, "--offload-param", kParamWhy) : "";
}

}  // namespace snug

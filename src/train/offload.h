// --offload-optimizer cpu (issue 30; DeepSpeed's zero_optimization.offload_optimizer.device
// "cpu"): the optimizer's state tensors are allocated in the host pool and its update runs on
// the host.
//
// The host pool is the device's host (core/device.h). On cpu and meta, whose host is the device
// itself, the run attaches a host device of the same backend, so the state is accounted apart
// from the device's memory as DeepSpeed's CPU offload is (on cpu it is the same RAM): the
// report's memory.host, the console's host table and the plan's host pool. Everything else that
// goes to dev.host() then lands in that pool too: the prefetcher's slots (input_data), as on an
// accelerator.
//
// The update reads the parameters and gradients where they are, so the device must be one the
// host addresses (cpu, meta). An accelerator (cuda, cpu-remote) would need the gradients
// downloaded and the updated weights uploaded each step: refused for now. LOMO and AdaLOMO are
// refused by the Trainer (their update is fused into backward: nothing to offload).
//
// --offload-param cpu (DeepSpeed's zero_optimization.offload_param.device "cpu"; --zero-stage 3
// only, TrainingArguments::validate): the rank's parameter shards (train/zero3_params.h) are
// allocated in the same host pool, category weights; each block's gather reads them from the host
// and the gathered block lives on the device as without the flag. The optimizer's pieces view the
// shards where they are; its state stays on the device unless --offload-optimizer cpu moves it.
// On cpu and meta only the accounting moves (the device's weights shrink by the shards, the
// host's grow by them); on an accelerator the gathers would upload from the host and the update
// would write host memory: refused for now, as --offload-optimizer is.
#pragma once

#include <string>

namespace snug {

class Device;
struct TrainingArguments;

// The values of --offload-optimizer: "none" (the default) and "cpu".
bool offloads_optimizer(const TrainingArguments& args);
// Without offload: nullptr. With it: the host device where the optimizer's state goes, attached
// to `dev` first when its host is itself. Throws snug::Error for a device the host does not
// address (on meta, a plan for one goes on: offload_unbuilt).
Device* offload_host(Device& dev, const TrainingArguments& args);

// The values of --offload-param: "none" (the default) and "cpu".
bool offloads_parameters(const TrainingArguments& args);
// Without it: nullptr. With it: the host device where the stage-3 shards go, attached as above.
// Throws snug::Error for a device the host does not address.
Device* offload_param_host(Device& dev, const TrainingArguments& args);

// Why a real run of `args` on `dev` (on meta: on the device a plan is for) refuses its offload
// flags, "" when it runs them: the refusal offload_host/offload_param_host throw off meta.
std::string offload_unbuilt(const Device& dev, const TrainingArguments& args);

}  // namespace snug

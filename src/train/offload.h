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
#pragma once

namespace snug {

class Device;
struct TrainingArguments;

// The values of --offload-optimizer: "none" (the default) and "cpu".
bool offloads_optimizer(const TrainingArguments& args);
// Without offload: nullptr. With it: the host device where the optimizer's state goes, attached
// to `dev` first when its host is itself. Throws snug::Error for a device the host does not
// address.
Device* offload_host(Device& dev, const TrainingArguments& args);

}  // namespace snug

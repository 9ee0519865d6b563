#include "train/zero3_init.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "kernels/backends.h"
#include "models/registry.h"
#include "train/model_setup.h"
#include "train/offload.h"
#include "train/zero3_params.h"
#include "train/zero_optimizer.h"

namespace snug {

void check_zero3_settings(const TrainingArguments& args, const Model& model) {
  check_zero_optimizer(args.optim, 3);
  const std::string why = model.parameter_gathering_unsupported();
  SNUG_CHECK(why.empty(), "--zero-stage 3: ", why);
  // 16-bit weights (--precision-layout deepspeed, --bf16-full) are gathered in the compute
  // dtype: nothing is cast. fp32 weights under --bf16/--fp16 would be cast whole per forward.
  SNUG_CHECK(args.compute_dtype() == ComputeDType::f32 || args.sixteen_bit_training(),
             "--zero-stage 3 with fp32 weights computes in fp32 so far (mixed precision casts "
             "every GEMM weight at the start of a forward, which needs them all whole); drop "
             "--bf16/--fp16, train bf16 weights (--bf16-full, or --precision-layout deepspeed "
             "for fp32 master weights in the optimizer), or use --zero-stage 0-2");
  SNUG_CHECK(!args.load_best_model_at_end,
             "--zero-stage 3 with --load-best-model-at-end: loading a checkpoint's weights "
             "back into the partitioned model at the end is not built yet; resume from the "
             "best checkpoint instead");
}

std::unique_ptr<nn::ConstructionPartition> zero3_init(const TrainingArguments& args, Device& dev,
                                                      int rank, int world) {
  if (args.zero_stage != 3) return nullptr;
  std::unordered_map<std::string, nn::PartitionSlot> slots;
  int64_t shard = 0;
  DType dtype = DType::f32;
  Device* home = nullptr;
  try {
    // What trains, from the same model on meta after the same PEFT steps as the Trainer's.
    Device meta(meta_backend());
    const auto m = create_model(args.model_config(), meta, args.param_dtype(), args.weight_quant());
    configure_model(*m, args);
    prepare_model(*m, args);
    if (!dev.is_meta() && !offload_unbuilt(dev, args).empty()) return nullptr;
    check_zero3_settings(args, *m);
    home = offload_param_host(dev, args);
    const std::vector<Zero3Entry> layout = zero3_layout(m->parameters(), world);
    dtype = layout.front().p->dtype();
    for (const Zero3Entry& e : layout) {
      slots[e.p->name] = {e.numel, e.shard, rank * e.shard, e.offset};
      shard += e.shard;
    }
  } catch (const Error&) {
    return nullptr;  // the Trainer refuses the run, with its own words, where it always has
  }
  Device& where = home != nullptr ? *home : dev;
  return std::make_unique<nn::ConstructionPartition>(
      Tensor::zeros({shard}, dtype, Category::weights, where), std::move(slots));
}

}  // namespace snug

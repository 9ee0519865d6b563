// The parameters of a model built from blocks: each block registers its own under a Hugging Face
// name (prefix + ".weight"), in construction order = HF named_parameters() order. The store also
// owns the model's RunContext (nn/run_context.h), which every block reads.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/device.h"
#include "nn/parameter.h"
#include "nn/run_context.h"
#include "quant/weight_quant.h"

namespace snug {

class ParameterStore {
 public:
  explicit ParameterStore(Device& dev) : dev_(&dev), ctx_(std::make_unique<nn::RunContext>(dev)) {}
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  // A new parameter (category weights, uninitialized) in the store's parameter dtype (f32, or
  // bf16 for --bf16-full). Throws on a duplicate name. A `quantizable` one (the blocks' Linear
  // weights) is stored quantized and frozen when a weight quantization is set
  // (--load-in-8bit/--load-in-4bit): the fp32 tensor never exists on the device. Inside a
  // nn::ConstructionPartition with a slot of that name (ZeRO stage 3) it is partitioned at once:
  // only the rank's slice exists (Parameter::shard).
  Parameter* add(const std::string& name, const Shape& shape, bool decay, bool quantizable = false);
  // As add(), always fp32 and never quantized (LoRA adapters).
  Parameter* add_f32(const std::string& name, const Shape& shape, bool decay);

  void set_param_dtype(DType d);
  DType param_dtype() const { return dtype_; }
  void set_weight_quant(const std::optional<WeightQuantConfig>& q) { quant_ = q; }

  Device& device() const { return *dev_; }
  nn::RunContext& context() const { return *ctx_; }
  const ParameterList& list() const { return list_; }
  // nullptr when no parameter has that name.
  Parameter* find(const std::string& name) const;
  // Frees every gradient (zero_grad(set_to_none=True)).
  void zero_grad();

 private:
  Parameter* push(std::unique_ptr<Parameter> p);

  Device* dev_;
  std::unique_ptr<nn::RunContext> ctx_;
  DType dtype_ = DType::f32;
  std::optional<WeightQuantConfig> quant_;
  std::vector<std::unique_ptr<Parameter>> owned_;
  ParameterList list_;
  // By name: find() and push()'s duplicate check in constant time (a linear scan made building
  // a model quadratic in its layers: plan --n-layer 8000 took 198 s; issue 29).
  std::unordered_map<std::string, Parameter*> by_name_;
};

}  // namespace snug

#include "nn/parameter_store.h"

#include "core/error.h"
#include "nn/construction_partition.h"

namespace snug {

void ParameterStore::set_param_dtype(DType d) {
  SNUG_CHECK(d == DType::f32 || d == DType::bf16 || d == DType::f16,
             "parameters are f32, bf16 or f16 (--bf16-full, --torch-dtype), not ", dtype_name(d));
  dtype_ = d;
}

Parameter* ParameterStore::push(std::unique_ptr<Parameter> p) {
  SNUG_CHECK(by_name_.emplace(p->name, p.get()).second, "parameter '", p->name,
             "' is registered twice");
  list_.push_back(p.get());
  owned_.push_back(std::move(p));
  return list_.back();
}

Parameter* ParameterStore::add(const std::string& name, const Shape& shape, bool decay,
                               bool quantizable) {
  auto p = std::make_unique<Parameter>();
  p->name = name;
  if (quantizable && quant_) {
    // Frozen and stored quantized from the start.
    p->quant = std::make_shared<QuantizedWeight>(empty_quantized_weight(shape, *quant_, *dev_));
    p->requires_grad = false;
  } else if (const nn::ConstructionPartition* cp = nn::ConstructionPartition::current();
             cp != nullptr && cp->place(*p, shape, dtype_)) {
    // ZeRO stage 3's zero.Init (nn/construction_partition.h): only the rank's slice exists.
  } else {
    p->value = Tensor::empty(shape, dtype_, Category::weights, *dev_);
  }
  p->decay = decay;
  return push(std::move(p));
}

Parameter* ParameterStore::add_f32(const std::string& name, const Shape& shape, bool decay) {
  auto p = std::make_unique<Parameter>();
  p->name = name;
  p->value = Tensor::empty(shape, DType::f32, Category::weights, *dev_);
  p->decay = decay;
  return push(std::move(p));
}

Parameter* ParameterStore::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

void ParameterStore::zero_grad() {
  for (Parameter* p : list_) p->free_grad();
}

}  // namespace snug

#include "nn/parameter_store.h"

#include "core/error.h"

namespace snug {

Parameter* ParameterStore::add(const std::string& name, const Shape& shape, bool decay) {
  SNUG_CHECK(find(name) == nullptr, "parameter '", name, "' is registered twice");
  auto p = std::make_unique<Parameter>();
  p->name = name;
  p->value = Tensor::empty(shape, DType::f32, Category::weights, *dev_);
  p->decay = decay;
  list_.push_back(p.get());
  owned_.push_back(std::move(p));
  return list_.back();
}

Parameter* ParameterStore::find(const std::string& name) const {
  for (Parameter* p : list_)
    if (p->name == name) return p;
  return nullptr;
}

void ParameterStore::zero_grad() {
  for (Parameter* p : list_) p->free_grad();
}

}  // namespace snug

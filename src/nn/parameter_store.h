// The parameters of a model built from blocks: each block registers its own under a Hugging Face
// name (prefix + ".weight"), in construction order = HF named_parameters() order.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "nn/parameter.h"

namespace snug {

class ParameterStore {
 public:
  explicit ParameterStore(Device& dev) : dev_(&dev) {}
  ParameterStore(const ParameterStore&) = delete;
  ParameterStore& operator=(const ParameterStore&) = delete;

  // A new fp32 parameter (category weights, uninitialized). Throws on a duplicate name.
  Parameter* add(const std::string& name, const Shape& shape, bool decay);
  Device& device() const { return *dev_; }
  const ParameterList& list() const { return list_; }
  // nullptr when no parameter has that name.
  Parameter* find(const std::string& name) const;
  // Frees every gradient (zero_grad(set_to_none=True)).
  void zero_grad();

 private:
  Device* dev_;
  std::vector<std::unique_ptr<Parameter>> owned_;
  ParameterList list_;
};

}  // namespace snug

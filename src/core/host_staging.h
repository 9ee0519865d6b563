// Host access to a tensor's bytes, for the host-side work around the op table: a file read into
// a tensor, a host-only op (GaLore's projector, the quantizer: kernels/op_table.h), values
// checked, compared or written out.
//
// Where the host addresses the device's memory (cpu) the staging is the tensor's own bytes and
// costs nothing (no allocation, so a cpu run's accounting is what it was); on meta it is null.
// Elsewhere it is a tensor of the same shape, dtype and category in the device's host pool
// (Device::host()), downloaded on construction when the use reads it and uploaded back by
// upload() when the use writes it.
#pragma once

#include "core/tensor.h"

namespace snug {

class HostStaging {
 public:
  enum class Use { read, write, read_write };
  HostStaging(const Tensor& t, Use use);

  // Host pointer to the staged bytes (nullptr on meta or for an undefined tensor).
  void* raw() const { return staged_.defined() ? staged_.raw() : t_.raw(); }
  template <typename T>
  T* data() const {
    return staged_.defined() ? staged_.data<T>() : (t_.defined() ? t_.data<T>() : nullptr);
  }
  // Writes the staged bytes into the tensor (nothing where they are the tensor's own).
  void upload() const;

 private:
  Tensor t_;
  Tensor staged_;  // defined only on a device the host does not address
};

}  // namespace snug

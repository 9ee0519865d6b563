// Finiteness of a tensor's values: the one scan that checks what a load reads (io/safetensors.h
// check_finite, adapters) and what a run writes (train/checkpoint.cpp), so that a NaN weight is
// refused where it enters or leaves instead of surfacing steps later as a NaN loss.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace snug {

struct NonFinite {
  int64_t index = 0;
  bool nan = false;  // else an infinity
};
// The first element of `t` that is nan or inf (f32, bf16, f16; other dtypes and meta tensors
// hold none), or nullopt.
std::optional<NonFinite> first_non_finite(const Tensor& t);

}  // namespace snug

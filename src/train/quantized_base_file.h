// The quantized frozen base of a checkpoint (--load-in-8bit / --load-in-4bit, QLoRA):
// quantized_base.safetensors next to model.safetensors holds, for every quantized parameter, the
// tensors of its QuantizedWeight exactly as the run held them (quant/weight_quant.h):
//   "<name>.codes" U8, "<name>.absmax" F32, or under double quantization "<name>.dq_codes" U8,
//   "<name>.dq_absmax" F32 and "<name>.dq_offset" F32;
// metadata "quantization" is WeightQuantConfig::describe() of the run. A resumed run and
// `snug export` read the base from here, so it is the run's own base bit for bit whatever
// --init-from or --seed gave it (issue 15: they used to rebuild it from the seed).
#pragma once

#include <string>

#include "io/safetensors.h"
#include "models/model.h"

namespace snug {

inline constexpr const char* kQuantizedBaseFile = "quantized_base.safetensors";

// Whether any parameter of the model is stored quantized.
bool has_quantized_base(const Model& model);

// The bytes of tensor data save_quantized_base writes (its header not counted).
int64_t quantized_base_bytes(const Model& model);

// Writes every quantized parameter's tensors to `path` (atomically, as save_safetensors).
void save_quantized_base(const std::string& path, const Model& model);

// Loads `path` into the model's quantized parameters, bit for bit. The file must hold exactly
// their tensors, with the model's quantization, dtypes and byte sizes; errors name the file and
// the tensor. No-op on meta.
void load_quantized_base(const std::string& path, Model& model);

// Copies the raw bytes of tensor `name` (any dtype) of an opened safetensors file into `t`,
// whose byte size must match; errors name the file and the tensor.
void read_raw_tensor(const SafetensorsFile& f, const std::string& name, Tensor& t);

}  // namespace snug

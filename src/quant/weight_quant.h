// Quantized frozen base weights held in tracked memory (--load-in-8bit / --load-in-4bit, QLoRA).
//
// core/quant_format.h quantizes into std::vectors, which the MemoryPool never sees. A model that
// keeps its frozen Linear weights quantized needs those bytes in its accounting, and identical on
// the meta device, so here the codes live in a `weights` tensor and the per-block state (absmax, or
// under double quantization its codes, group absmax and offset) in `quant_state` tensors on the
// weight's device. The values are bit-identical to quant::quantize (the same code writes them,
// through quant::quantize_blockwise_into / double_quantize_into), and the bytes equal
// quant::storage_breakdown exactly, so a dry run plans them to the byte.
//
// Formats: nf4 and fp4 (bnb 4-bit, blocks of 64, optional double quantization: QLoRA's
// --load-in-4bit with --bnb-4bit-quant-type and --bnb-4bit-use-double-quant) and int8_blockwise
// (symmetric absmax int8 in blocks of 256: --load-in-8bit).
//
// Memory of one quantize_weight call: the result (weight_quant_bytes) plus, under double
// quantization only, a `temporary` tensor of the fp32 block absmax (4 * num_blocks bytes, equal to
// quant::quantize_workspace_bytes) freed before it returns. dequantize_weight allocates nothing:
// the caller owns `out` (a Linear dequantizes into a temporary of numel floats per use).
#pragma once

#include <cstdint>
#include <string>

#include "core/device.h"
#include "core/quant_format.h"
#include "core/tensor.h"

namespace snug {

struct WeightQuantConfig {
  quant::Format format = quant::Format::nf4;  // nf4 | fp4 | int8_blockwise
  bool double_quant = false;                  // nf4/fp4 only
  int64_t block = 0;  // elements per absmax block; 0 = quant::default_block(format)

  // This config with the block resolved; throws snug::Error naming what is wrong (another format,
  // double quant on int8_blockwise, a negative block).
  WeightQuantConfig resolved() const;
  // "nf4, blocks of 64, double quant", "int8_blockwise, blocks of 256".
  std::string describe() const;
};

struct QuantizedWeight {
  WeightQuantConfig cfg;  // block resolved (never 0)
  Shape shape;            // logical shape of the fp32 weight
  int64_t numel = 0;
  Tensor codes;      // u8 (numel) for int8 (two's complement); u8 (ceil(numel/2)) for 4-bit, two
                     // codes per byte, FIRST element in the HIGH nibble (as quant.h). weights
  Tensor absmax;     // f32 (num_blocks), quant_state; undefined under double quant
  Tensor dq_codes;   // u8 (num_blocks), quant_state, double quant only: signed dynamic map codes
  Tensor dq_absmax;  // f32 (ceil(num_blocks/256)), quant_state, double quant only
  Tensor dq_offset;  // f32 (1), quant_state, double quant only: the mean that was subtracted

  int64_t num_blocks() const;
  // Sum of the defined tensors' bytes (== weight_quant_bytes(numel, cfg).total()).
  int64_t tracked_bytes() const;
};

// Allocates the tensors on w's device and quantizes w (f32) into them; on meta only the
// allocations happen. `name` (e.g. "h.0.attn.c_attn.weight") prefixes every error message.
// Throws snug::Error for a non-f32 or empty weight, NaN/Inf values and a bad config.
QuantizedWeight quantize_weight(const Tensor& w, const WeightQuantConfig& cfg,
                                const std::string& name = "weight");
// The same from a host array of shape_numel(shape) floats (while loading: the fp32 source need not
// be tracked), allocating on `dev`. On a meta device w is not read and may be nullptr.
QuantizedWeight quantize_weight(const float* w, const Shape& shape, const WeightQuantConfig& cfg,
                                Device& dev, const std::string& name = "weight");

// The storage of a quantized weight without values (the tensors quantize_weight leaves, zeroed
// codes, no temporary): a model allocates its frozen base this way, on meta and real devices
// alike, and fills it with quantize_weight_into when the values arrive (initialization or a
// file). Throws snug::Error for a bad config or an empty shape.
QuantizedWeight empty_quantized_weight(const Shape& shape, const WeightQuantConfig& cfg,
                                       Device& dev);
// Quantizes w (numel floats in host memory: the loader's staging, like the fp32 source on a
// GPU machine, is not device memory) into q's existing tensors, bit-identical to
// quantize_weight. Under double quantization the fp32 block absmax is staged in host memory too.
// Runs the device's quantize_weight_codes op (kernels/quant_ops.inc): nothing on meta.
void quantize_weight_into(QuantizedWeight& q, const float* w, const std::string& name = "weight");

// out[0..numel) = the dequantized weight, bit-identical to quant::dequantize of the same values:
// the device's dequantize_weight_codes op (kernels/quant_ops.inc; nothing on meta), no allocation.
void dequantize_weight(const QuantizedWeight& q, float* out);
// The plain reference: copies the tensors into a quant::Quantized (to_quantized) and runs
// quant::dequantize. For tests; reads host values (throws for a meta weight) and allocates
// untracked host memory.
void dequantize_weight_reference(const QuantizedWeight& q, float* out);
// The tensors' contents as a quant::Quantized (host copies; not on meta). For tests and for
// quant::compute_stats.
quant::Quantized to_quantized(const QuantizedWeight& q);

// Exact bytes {codes, state} of a quantized weight of numel elements: quant::storage_breakdown
// for the resolved config, and what quantize_weight allocates under weights / quant_state.
quant::StorageBytes weight_quant_bytes(int64_t numel, const WeightQuantConfig& cfg);

// The CLI's --bnb-4bit-quant-type values: "nf4" | "fp4". Throws snug::Error naming the flag.
quant::Format parse_4bit_quant_type(const std::string& s);

}  // namespace snug

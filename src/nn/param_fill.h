// Filling a parameter with initial values generated on the host, whatever its storage: fp32,
// bf16 (--bf16-full, --torch-dtype bfloat16), f16 (--torch-dtype float16) or quantized
// (--load-in-8bit/4bit).
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/op_table.h"
#include "nn/parameter.h"

namespace snug::nn {

// Sets p's values from `fill`, which writes n consecutive fp32 values per call (in order, from
// the first element). fp32 and 16-bit parameters are filled a chunk at a time through a small host
// buffer (16 KiB), copied or rounded to nearest even, so a 16-bit model initialized from a seed
// holds exactly the fp32 model's values rounded, with no fp32 copy of the tensor. A quantized
// parameter gets all its values in host memory, then quantized. Through the device's copies
// (Device::upload): on meta the values are generated and dropped, so callers skip initialization
// there. (`ops` is the device's table, kept for the callers; the copies are the device's own.)
void fill_values(Parameter& p, const OpTable& ops,
                 const std::function<void(float*, int64_t)>& fill);

// As fill_values, with the values addressed by index: fill(out, begin, n) writes the values of
// elements [begin, begin + n) and may be called for any range, in any order, from any thread.
// On a device whose memory the host addresses (cpu) the chunks (64 Ki values) are filled, and
// rounded to 16 bits, in parallel (OpenMP), each thread with its own buffer; a quantized
// parameter's fp32 values are filled in parallel into one host buffer of its size, then quantized
// (in parallel too): one tensor's fp32 values at most, never the model's. On a device the host
// cannot address (a GPU, cpu-remote), slabs of 4 Mi values are filled (and rounded) in parallel on
// the host and uploaded one after another. On meta nothing is filled. The values do not depend on
// the thread count. While an InitProgress is alive (nn/init_progress.h) the parameter's elements
// are reported to it. A parameter partitioned at construction (Parameter::shard, ZeRO stage 3)
// gets only its rank's slice filled (fill_values: all values made in order, the slice's kept).
using IndexedFill = std::function<void(float* out, int64_t begin, int64_t n)>;
void fill_values_indexed(Parameter& p, const IndexedFill& fill);

// A partitioned parameter's slice (Parameter::shard, ZeRO stage 3) from `whole`, its whole values
// in host memory (p's shape, the shard's dtype): elements [shard_begin, shard_begin + shard) that
// are values (the padding past numel() is left as it is: zeros). Nothing on meta.
void store_slice(Parameter& p, const Tensor& whole);

// out(p.numel(), host memory) = p's values in fp32: copied, widened from 16 bits or dequantized,
// through the device's op table where the host addresses the device's memory (cpu), else into a
// device temporary or host staging and downloaded. Nothing on meta. (Model::read_values.)
void read_values(const Parameter& p, float* out);

}  // namespace snug::nn
